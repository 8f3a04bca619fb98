// A lock for data touched on the hot path by one thread at a time, held for
// a few instructions: spinning beats a futex-based mutex there.
#pragma once

#include <sched.h>

#include <atomic>

namespace gpuleak::collector {

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

}  // namespace gpuleak::collector
