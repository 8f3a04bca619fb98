// Per-thread event buffers: each recording thread fills its own chain of
// chunks, and the writer thread empties them every flush.
//
// One producer (the thread) and one consumer (the writer, or whoever flushes
// under the recorder's write lock) per buffer, so the thread's side needs no
// lock and no atomic read-modify-write: it writes into its current chunk and
// publishes how far it got with a release store. A full chunk is followed by
// the spare one the writer left (already faulted in, so the program's
// allocation calls take no page faults for us), or a new one.
//
// Buffers are registered on a thread's first event and retired when the
// thread exits; a retired buffer is freed after its last drain. The registry
// is never destroyed (threads may still record while the process exits).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "collector/spin_lock.h"
#include "trace/records.h"

namespace gpuleak::collector {

struct Chunk;

// Sorts `ranges` and merges those that touch; beyond kMaxLostRanges, the
// closest neighbours are merged (a range may then cover numbers of events
// that were written: readers take those as they come).
void merge_seq_ranges(std::vector<trace::SeqRange>& ranges);
inline constexpr std::size_t kMaxLostRanges = 1024;

class ThreadBuffer {
 public:
  explicit ThreadBuffer(std::uint32_t thread_id);
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  const std::uint32_t thread_id;  // Linux tid

  // ---- The recording thread only ----

  // Room for `size` contiguous bytes, or nullptr when the thread already has
  // max_buffer_bytes() waiting (the writer is stalled): then call drop().
  char* reserve(std::size_t size);
  // Hands the `size` bytes written at the last reserve() to the writer.
  // Returns true when the writer should be woken (a large chunk filled up).
  bool commit(std::size_t size);
  // Counts records refused for lack of room: definitions, and events whose
  // sequence number was already taken (`seq`), which the writer's
  // LostRecord lists so readers never wait for them.
  void drop(std::uint32_t records);
  void drop(std::uint32_t records, std::uint64_t seq);
  // The thread has ended: the writer frees the buffer after its last drain.
  void retire() { retired_.store(true, std::memory_order_release); }

  // ---- The writer only ----

  // Passes every committed byte range to `sink(std::string_view)`, in order,
  // and recycles emptied chunks. Returns the events dropped since the last
  // drain.
  template <class Sink>
  std::uint64_t drain(Sink&& sink);
  // Moves the sequence numbers of events dropped since the last call to
  // `out` (a few ranges; a thread that dropped in many places gets one range
  // that also covers numbers of other threads' events).
  void take_dropped_ranges(std::vector<trace::SeqRange>& out);
  // Whether the thread has ended (checked before the last drain).
  bool retired() const { return retired_.load(std::memory_order_acquire); }

  // Ranges a thread keeps between drains before it widens the last one.
  static constexpr std::size_t kMaxDroppedRanges = 32;

 private:
  Chunk* next_chunk(std::size_t at_least);
  void recycle(Chunk* chunk);
  void prepare_spare();

  // The thread's side.
  Chunk* tail_;
  std::size_t used_ = 0;       // bytes of tail_ written (committed or reserved)
  std::size_t next_size_;      // size of the next new chunk (grows to kMaxChunkBytes)
  bool wake_pending_ = false;  // a large chunk was finished since the last commit
  std::uint64_t dropped_ = 0;  // published in dropped_total_

  // The writer's side.
  Chunk* head_;
  std::size_t read_ = 0;  // bytes of head_ already passed on
  std::uint64_t dropped_seen_ = 0;
  bool active_ = false;  // the thread filled a chunk since the last drain

  // Shared.
  std::atomic<Chunk*> spare_{nullptr};           // writer puts, thread takes
  std::atomic<std::size_t> bytes_held_{0};       // all chunks' capacity, spare included
  std::atomic<std::uint64_t> dropped_total_{0};  // thread stores, writer reads
  std::atomic<std::size_t> wanted_size_;         // thread's next chunk size, for the spare
  std::atomic<bool> retired_{false};
  // Dropped sequence numbers, under dropped_lock_ (drops happen only while
  // the writer is behind, so the lock is off the hot path).
  SpinLock dropped_lock_;
  trace::SeqRange dropped_ranges_[kMaxDroppedRanges];
  std::size_t dropped_range_count_ = 0;
};

class ThreadBuffers {
 public:
  // The calling thread's buffer; registers it (and returns is_new = true)
  // the first time.
  ThreadBuffer& current(bool* is_new);

  // Drains every buffer into `sink(std::string_view bytes)`, then frees the
  // buffers of exited threads. Returns the records dropped since the last
  // call, and appends the sequence numbers of dropped events to `dropped`
  // (sorted, merged).
  template <class Sink>
  std::uint64_t drain(Sink&& sink, std::vector<trace::SeqRange>& dropped);

  // A thread's waiting bytes beyond which its events are refused, so a
  // stalled writer cannot exhaust the program's memory (GPULEAK_BUFFER_BYTES).
  static constexpr std::size_t kMaxBufferBytes = 48u << 20;
  static void set_max_buffer_bytes(std::size_t bytes) {
    max_buffer_bytes_.store(bytes, std::memory_order_relaxed);
  }
  static std::size_t max_buffer_bytes() {
    return max_buffer_bytes_.load(std::memory_order_relaxed);
  }
  // A thread's first chunk; each next one is twice as large, up to
  // kMaxChunkBytes. Finishing a chunk of kWakeWriterBytes or more wakes the
  // writer early.
  static constexpr std::size_t kFirstChunkBytes = 64u << 10;
  static constexpr std::size_t kMaxChunkBytes = 4u << 20;
  static constexpr std::size_t kWakeWriterBytes = 1u << 20;

 private:
  std::mutex registry_mutex_;
  std::vector<ThreadBuffer*> buffers_;
  static inline std::atomic<std::size_t> max_buffer_bytes_{kMaxBufferBytes};
};

// ---- Implementation details ----

struct Chunk {
  explicit Chunk(std::size_t bytes) : capacity(bytes), data(new char[bytes]) {}
  ~Chunk() { delete[] data; }
  const std::size_t capacity;
  char* const data;
  std::atomic<std::size_t> committed{0};  // bytes the writer may read
  std::atomic<Chunk*> next{nullptr};      // set after the last commit to this chunk
};

template <class Sink>
std::uint64_t ThreadBuffer::drain(Sink&& sink) {
  for (;;) {
    Chunk* chunk = head_;
    Chunk* next = chunk->next.load(std::memory_order_acquire);
    // Read after `next`: once the thread has moved on, this is final.
    std::size_t end = chunk->committed.load(std::memory_order_acquire);
    if (end > read_) {
      sink(std::string_view(chunk->data + read_, end - read_));
      read_ = end;
    }
    if (!next) break;
    head_ = next;
    read_ = 0;
    active_ = true;
    recycle(chunk);
  }
  prepare_spare();
  std::uint64_t total = dropped_total_.load(std::memory_order_acquire);
  std::uint64_t dropped = total - dropped_seen_;
  dropped_seen_ = total;
  return dropped;
}

template <class Sink>
std::uint64_t ThreadBuffers::drain(Sink&& sink, std::vector<trace::SeqRange>& dropped_ranges) {
  std::lock_guard<std::mutex> registry_lock(registry_mutex_);
  std::uint64_t dropped = 0;
  std::size_t ranges_before = dropped_ranges.size();
  for (ThreadBuffer*& buffer : buffers_) {
    bool last = buffer->retired();  // before draining: nothing can follow
    dropped += buffer->drain(sink);
    // After the drain: a number dropped before the counted drops is listed.
    buffer->take_dropped_ranges(dropped_ranges);
    if (last) {
      delete buffer;
      buffer = nullptr;
    }
  }
  std::erase(buffers_, nullptr);
  if (dropped_ranges.size() > ranges_before) merge_seq_ranges(dropped_ranges);
  return dropped;
}

}  // namespace gpuleak::collector
