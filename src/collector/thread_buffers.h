// Per-thread event buffers: the hot path appends encoded records to the
// calling thread's own buffer under that buffer's (uncontended) lock; the
// writer thread takes the bytes out every flush.
//
// Buffers are registered on a thread's first event and retired when the
// thread exits; a retired buffer is freed after its last drain. The registry
// is never destroyed (threads may still record while the process exits).
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gpuleak::collector {

// A lock for one producer and the writer. Both hold it only for a few
// instructions (the writer swaps strings rather than copying under it), so
// spinning beats a futex-based mutex on the hot path.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      if (spins > 64)
        sched_yield();
      else
        __builtin_ia32_pause();
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

struct ThreadBuffer {
  SpinLock lock;
  std::string bytes;              // encoded records, guarded by lock
  std::uint32_t records = 0;      // guarded by lock
  std::uint64_t dropped = 0;      // events refused because the buffer was full; guarded by lock
  std::uint32_t thread_id = 0;    // Linux tid
  bool retired = false;           // the thread has exited; guarded by lock
  std::string spare;              // the writer's side of the swap; writer only
  std::size_t largest_drain = 0;  // most bytes one drain took lately; writer only
};

class ThreadBuffers {
 public:
  // A buffer holding more than this refuses further events until drained,
  // so a stalled writer cannot exhaust the program's memory.
  static constexpr std::size_t kMaxBufferBytes = 48u << 20;
  // Above this the writer is woken early.
  static constexpr std::size_t kWakeWriterBytes = 4u << 20;
  // What a thread's buffer holds before its first drain.
  static constexpr std::size_t kInitialBytes = 64u << 10;

  // The calling thread's buffer; registers it (and returns is_new = true)
  // the first time.
  ThreadBuffer& current(bool* is_new);

  // Hands each buffer's records to `sink(bytes, records, dropped)` (after
  // swapping them out under the buffer's lock), and frees buffers of
  // exited threads.
  template <class Sink>
  void drain(Sink&& sink);

  // Called from the thread-exit hook.
  void retire(ThreadBuffer* buffer);

 private:
  // Empties the writer's side of a buffer and makes it as large as the
  // thread's recent drains need, touching its pages here: growing on the
  // recording thread would mean page faults (and copies) in the program's
  // allocation calls, a good part of a stream-ordered pair's cost.
  static void prepare_spare(ThreadBuffer& buffer);

  std::mutex registry_mutex_;
  std::vector<ThreadBuffer*> buffers_;
};

template <class Sink>
void ThreadBuffers::drain(Sink&& sink) {
  std::lock_guard<std::mutex> registry_lock(registry_mutex_);
  for (ThreadBuffer*& buffer : buffers_) {
    bool free_it = false;
    std::uint32_t records = 0;
    std::uint64_t dropped = 0;
    prepare_spare(*buffer);
    {
      std::lock_guard<SpinLock> lock(buffer->lock);
      buffer->bytes.swap(buffer->spare);
      records = buffer->records;
      dropped = buffer->dropped;
      buffer->records = 0;
      buffer->dropped = 0;
      free_it = buffer->retired;
    }
    buffer->largest_drain =
        std::max(buffer->largest_drain / 2 + buffer->largest_drain / 4, buffer->spare.size());
    sink(buffer->spare, records, dropped);
    if (free_it) {
      delete buffer;
      buffer = nullptr;
    }
  }
  buffers_.erase(std::remove(buffers_.begin(), buffers_.end(), nullptr), buffers_.end());
}

}  // namespace gpuleak::collector
