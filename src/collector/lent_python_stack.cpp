#include "collector/lent_python_stack.h"

#include <atomic>

#include "collector/python_frames.h"

namespace gpuleak::collector {

namespace {

constexpr int kMaxLentFrames = PythonCapture::kMaxFrames;

// Odd while a lender writes. Frames are atomics (relaxed) so that a reader
// racing a writer reads stale values, never undefined behaviour; the
// sequence tells it to throw them away.
std::atomic<unsigned> g_sequence{0};
std::atomic<int> g_depth{0};
std::atomic<int> g_count{0};
std::atomic<void*> g_codes[kMaxLentFrames];
std::atomic<int> g_positions[kMaxLentFrames];

void publish(void* const* codes, const int* positions, int count) {
  g_sequence.fetch_add(1, std::memory_order_acq_rel);  // odd: writing
  for (int i = 0; i < count; ++i) {
    g_codes[i].store(codes[i], std::memory_order_relaxed);
    g_positions[i].store(positions[i], std::memory_order_relaxed);
  }
  g_count.store(count, std::memory_order_relaxed);
  g_sequence.fetch_add(1, std::memory_order_release);  // even: done
}

}  // namespace

void lend_python_stack(const PythonFrameReader* reader) {
  if (g_depth.fetch_add(1, std::memory_order_acq_rel) != 0) return;
  if (!reader || !reader->frames) return;
  void* codes[kMaxLentFrames];
  int positions[kMaxLentFrames];
  int count = reader->frames(codes, positions, kMaxLentFrames);
  publish(codes, positions, count > 0 ? count : 0);
}

void end_python_stack_loan() {
  int before = g_depth.fetch_sub(1, std::memory_order_acq_rel);
  if (before <= 0) {  // unmatched end: undo, keep the counter sane
    g_depth.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  if (before == 1) publish(nullptr, nullptr, 0);
}

int borrow_python_stack(void** codes, int* positions, int max) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    unsigned before = g_sequence.load(std::memory_order_acquire);
    if (before & 1u) continue;
    int count = g_count.load(std::memory_order_relaxed);
    if (count <= 0) return 0;
    if (count > max) count = max;
    for (int i = 0; i < count; ++i) {
      codes[i] = g_codes[i].load(std::memory_order_relaxed);
      positions[i] = g_positions[i].load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_sequence.load(std::memory_order_relaxed) == before) return count;
  }
  return 0;
}

}  // namespace gpuleak::collector
