#include "collector/thread_buffers.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace gpuleak::collector {

namespace {

// The calling thread's buffer. A plain pointer (no destructor): glibc runs
// thread_local destructors before atexit handlers, and the collector still
// records during exit (the exit record, frees in static destructors).
thread_local ThreadBuffer* t_buffer = nullptr;

// Retires a thread's buffer when the thread ends. Thread-specific data
// destructors run for threads that end, but not for the main thread when
// the process exits, so the main thread's buffer stays valid to the end.
pthread_key_t g_exit_key;
pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;

void on_thread_exit(void* value) {
  auto* buffer = static_cast<ThreadBuffer*>(value);
  if (t_buffer == buffer) t_buffer = nullptr;
  if (buffer) buffer->retire();
}

void make_exit_key() { pthread_key_create(&g_exit_key, on_thread_exit); }

Chunk* new_chunk(std::size_t bytes) {
  try {
    return new Chunk(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace

ThreadBuffer::ThreadBuffer(std::uint32_t id)
    : thread_id(id),
      tail_(new Chunk(ThreadBuffers::kFirstChunkBytes)),
      next_size_(ThreadBuffers::kFirstChunkBytes * 2),
      head_(tail_),
      bytes_held_(ThreadBuffers::kFirstChunkBytes),
      wanted_size_(next_size_) {}

ThreadBuffer::~ThreadBuffer() {
  for (Chunk* chunk = head_; chunk;) {
    Chunk* next = chunk->next.load(std::memory_order_acquire);
    delete chunk;
    chunk = next;
  }
  delete spare_.load(std::memory_order_acquire);
}

char* ThreadBuffer::reserve(std::size_t size) {
  if (used_ + size <= tail_->capacity) return tail_->data + used_;
  Chunk* chunk = next_chunk(size);
  if (!chunk) return nullptr;
  if (tail_->capacity >= ThreadBuffers::kWakeWriterBytes) wake_pending_ = true;
  // Everything in tail_ is committed: from here on it is the writer's.
  tail_->next.store(chunk, std::memory_order_release);
  tail_ = chunk;
  used_ = 0;
  return chunk->data;
}

bool ThreadBuffer::commit(std::size_t size) {
  used_ += size;
  tail_->committed.store(used_, std::memory_order_release);
  bool wake = wake_pending_;
  wake_pending_ = false;
  return wake;
}

void ThreadBuffer::drop(std::uint32_t records) {
  dropped_ += records;
  dropped_total_.store(dropped_, std::memory_order_release);
}

void ThreadBuffer::drop(std::uint32_t records, std::uint64_t seq) {
  {
    std::lock_guard<SpinLock> lock(dropped_lock_);
    trace::SeqRange* last =
        dropped_range_count_ ? &dropped_ranges_[dropped_range_count_ - 1] : nullptr;
    if (last && seq >= last->first_seq && seq < last->first_seq + last->count) {
      // already covered (a widened range)
    } else if (last && seq == last->first_seq + last->count) {
      ++last->count;
    } else if (dropped_range_count_ < kMaxDroppedRanges) {
      dropped_ranges_[dropped_range_count_++] = trace::SeqRange{seq, 1};
    } else if (seq > last->first_seq) {
      last->count = seq - last->first_seq + 1;  // widen: covers others' numbers too
    } else {
      // Below the last range (a free's number is taken at its call's entry):
      // widen the last range down to it.
      last->count += last->first_seq - seq;
      last->first_seq = seq;
    }
  }
  drop(records);
}

void ThreadBuffer::take_dropped_ranges(std::vector<trace::SeqRange>& out) {
  std::lock_guard<SpinLock> lock(dropped_lock_);
  out.insert(out.end(), dropped_ranges_, dropped_ranges_ + dropped_range_count_);
  dropped_range_count_ = 0;
}

void merge_seq_ranges(std::vector<trace::SeqRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const trace::SeqRange& a, const trace::SeqRange& b) {
    return a.first_seq < b.first_seq;
  });
  std::vector<trace::SeqRange> merged;
  for (const trace::SeqRange& r : ranges) {
    if (!merged.empty() && r.first_seq <= merged.back().first_seq + merged.back().count) {
      std::uint64_t end =
          std::max(merged.back().first_seq + merged.back().count, r.first_seq + r.count);
      merged.back().count = end - merged.back().first_seq;
    } else {
      merged.push_back(r);
    }
  }
  // Too many: join neighbours pairwise, in rounds, until few enough.
  while (merged.size() > kMaxLostRanges) {
    std::vector<trace::SeqRange> joined;
    for (std::size_t i = 0; i < merged.size(); i += 2) {
      if (i + 1 == merged.size()) {
        joined.push_back(merged[i]);
      } else {
        joined.push_back(
            trace::SeqRange{merged[i].first_seq,
                            merged[i + 1].first_seq + merged[i + 1].count - merged[i].first_seq});
      }
    }
    merged.swap(joined);
  }
  ranges.swap(merged);
}

Chunk* ThreadBuffer::next_chunk(std::size_t at_least) {
  Chunk* chunk = spare_.exchange(nullptr, std::memory_order_acq_rel);
  if (chunk && chunk->capacity < at_least) {
    bytes_held_.fetch_sub(chunk->capacity, std::memory_order_relaxed);
    delete chunk;
    chunk = nullptr;
  }
  if (chunk) return chunk;
  std::size_t size = std::max(next_size_, at_least);
  if (bytes_held_.load(std::memory_order_relaxed) + size > ThreadBuffers::max_buffer_bytes()) {
    return nullptr;
  }
  chunk = new_chunk(size);
  if (!chunk) return nullptr;
  bytes_held_.fetch_add(size, std::memory_order_relaxed);
  next_size_ = std::min(next_size_ * 2, ThreadBuffers::kMaxChunkBytes);
  wanted_size_.store(next_size_, std::memory_order_relaxed);
  return chunk;
}

void ThreadBuffer::recycle(Chunk* chunk) {
  if (chunk->capacity >= wanted_size_.load(std::memory_order_relaxed)) {
    chunk->committed.store(0, std::memory_order_relaxed);
    chunk->next.store(nullptr, std::memory_order_relaxed);
    Chunk* empty = nullptr;
    if (spare_.compare_exchange_strong(empty, chunk, std::memory_order_acq_rel)) return;
  }
  bytes_held_.fetch_sub(chunk->capacity, std::memory_order_relaxed);
  delete chunk;
}

void ThreadBuffer::prepare_spare() {
  if (!active_) return;  // a thread that records little keeps its one small chunk
  active_ = false;
  if (spare_.load(std::memory_order_acquire)) return;
  std::size_t size = wanted_size_.load(std::memory_order_relaxed);
  if (bytes_held_.load(std::memory_order_relaxed) + size > ThreadBuffers::max_buffer_bytes())
    return;
  Chunk* chunk = new_chunk(size);
  if (!chunk) return;
  std::memset(chunk->data, 0, size);  // its page faults happen here, on the writer
  bytes_held_.fetch_add(size, std::memory_order_relaxed);
  Chunk* empty = nullptr;
  if (!spare_.compare_exchange_strong(empty, chunk, std::memory_order_acq_rel)) {
    bytes_held_.fetch_sub(size, std::memory_order_relaxed);
    delete chunk;
  }
}

ThreadBuffer& ThreadBuffers::current(bool* is_new) {
  if (t_buffer) {
    *is_new = false;
    return *t_buffer;
  }
  pthread_once(&g_exit_key_once, make_exit_key);
  auto* buffer = new ThreadBuffer(static_cast<std::uint32_t>(::syscall(SYS_gettid)));
  {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    buffers_.push_back(buffer);
  }
  t_buffer = buffer;
  pthread_setspecific(g_exit_key, buffer);
  *is_new = true;
  return *buffer;
}

}  // namespace gpuleak::collector
