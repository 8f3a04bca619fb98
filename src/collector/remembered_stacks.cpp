#include "collector/remembered_stacks.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <new>

#include "collector/native_unwinder.h"

namespace gpuleak::collector {

thread_local RememberedStacks* t_remembered_stacks = nullptr;

namespace {

// A place whose remembered stack failed the check this many times in a row
// is learned again (a loop that moved on to another caller); fewer would
// relearn on every call where two callers take turns at the same place.
constexpr int kFailedChecksBeforeRelearning = 4;

pthread_key_t g_memory_key;
pthread_once_t g_memory_key_once = PTHREAD_ONCE_INIT;
bool g_memory_key_ok = false;

thread_local bool t_memory_unavailable = false;

void free_thread_memory(void* memory) {
  // Runs on the exiting thread: captures made later during its exit (by
  // other destructors) are unwound, without a new memory to leak.
  if (t_remembered_stacks == memory) t_remembered_stacks = nullptr;
  t_memory_unavailable = true;
  delete static_cast<RememberedStacks*>(memory);
}

void make_memory_key() {
  g_memory_key_ok = pthread_key_create(&g_memory_key, free_thread_memory) == 0;
}

// This thread's memory, made on first use. Null when it cannot be made or the
// thread's stack bounds are unknown (nothing is remembered then).
RememberedStacks* thread_memory() {
  if (t_remembered_stacks) return t_remembered_stacks;
  // Asking again would read /proc/self/maps on every capture (the main
  // thread's stack bounds come from there).
  if (t_memory_unavailable) return nullptr;
  t_memory_unavailable = true;
  pthread_once(&g_memory_key_once, make_memory_key);
  if (!g_memory_key_ok) return nullptr;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
  void* low = nullptr;
  size_t size = 0;
  int got = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (got != 0 || size == 0) return nullptr;
  auto* memory = new (std::nothrow) RememberedStacks;
  if (!memory) return nullptr;
  memory->stack_low = reinterpret_cast<std::uintptr_t>(low);
  memory->stack_high = memory->stack_low + size;
  if (pthread_setspecific(g_memory_key, memory) != 0) {
    delete memory;
    return nullptr;
  }
  t_remembered_stacks = memory;
  t_memory_unavailable = false;
  return memory;
}

// Makes `e` the entry of a place seen once. The count goes first: a capture
// from a signal handler on this thread then never pairs the new place with
// the old slots.
void forget(RememberedStack& e, std::uintptr_t frame_address, std::uintptr_t return_address,
            int max_frames) {
  e.count = -1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  e.frame_address = frame_address;
  e.return_address = return_address;
  e.max_frames = max_frames;
  e.failed_checks = 0;
}

}  // namespace

bool should_learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address,
                        int max_frames) {
  RememberedStacks* memory = thread_memory();
  if (!memory) return false;
  RememberedStack& e = memory->entry_for(frame_address, return_address);
  if (e.frame_address != frame_address || e.return_address != return_address ||
      e.max_frames != max_frames) {
    forget(e, frame_address, return_address, max_frames);
    return false;
  }
  if (e.count < 0) return true;  // the second time here
  return ++e.failed_checks >= kFailedChecksBeforeRelearning;
}

[[gnu::noinline]] int learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address,
                                  std::uint64_t* frames, int max_frames) {
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return 0;
  StackSlot walked[kMaxNativeFrames + kOwnFrames];
  int count = 0;
  int limit = max_frames + kOwnFrames;
  do {
    unw_word_t ip = 0, sp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0)
      break;
    // A frame's return address sits just below its caller's stack pointer.
    walked[count++] = StackSlot{static_cast<std::uintptr_t>(sp) - sizeof(std::uint64_t), ip};
  } while (count < limit && unw_step(&cursor) > 0);

  int first = 0;
  while (first < count && is_collector_frame(walked[first].ip)) ++first;
  int kept = std::min(count - first, max_frames);
  for (int i = 0; i < kept; ++i) frames[i] = walked[first + i].ip;

  RememberedStacks* memory = t_remembered_stacks;
  if (!memory) return kept;
  RememberedStack& e = memory->entry_for(frame_address, return_address);
  forget(e, frame_address, return_address, max_frames);
  if (kept > kMaxRememberedFrames) return kept;
  // Remembered only when every slot lies in this thread's stack, above the
  // capture, and holds the return address the walk found there (a signal
  // frame, for one, does not).
  for (int i = 0; i < kept; ++i) {
    const StackSlot& slot = walked[first + i];
    if (slot.address < frame_address - sizeof(std::uint64_t) || slot.address < memory->stack_low ||
        slot.address + sizeof(std::uint64_t) > memory->stack_high ||
        *reinterpret_cast<const std::uint64_t*>(slot.address) != slot.ip)
      return kept;
    e.slots[i] = slot;
  }
  // A capture from a signal handler on this thread must not see the count
  // before the slots.
  std::atomic_signal_fence(std::memory_order_release);
  e.count = kept;
  return kept;
}

}  // namespace gpuleak::collector
