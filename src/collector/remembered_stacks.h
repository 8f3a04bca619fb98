// A per-thread memory of recently unwound native stacks, so that a loop which
// allocates from one place is unwound once instead of on every call.
//
// A remembered stack is reused when a capture starts at the same place (the
// capturing function's canonical frame address and return address are the
// same) and every return address of the remembered stack still sits in the
// stack slot it was read from. For frames whose size is fixed at each
// instruction, which is all compiled code that does not use alloca or
// variable-length arrays, that proves the stack is the same: a frame's slot
// follows from the previous frame's address and return address, and the
// check reads them in that order. A frame that changes size between calls
// could, with stale memory holding the old return addresses, let a different
// stack pass the check; GPULEAK_REUSE_STACKS=0 turns reuse off.
//
// Only stacks inside the thread's own pthread stack are remembered: every
// slot is then above the current stack pointer of a later capture with the
// same frame address, so reading it cannot fault (a fiber's or signal
// stack's captures are always unwound).
#pragma once

#include <cstdint>

namespace gpuleak::collector {

// Longer stacks are always unwound.
constexpr int kMaxRememberedFrames = 64;

struct StackSlot {
  std::uintptr_t address;  // where the return address was read
  std::uint64_t ip;        // the return address
};

struct RememberedStack {
  std::uintptr_t frame_address = 0;  // the capturing function's canonical frame address
  std::uintptr_t return_address = 0;
  // -1 while the place was seen once (a one-off stack is not worth the slower
  // walk that learns the slots); else the number of slots.
  int count = -1;
  int max_frames = 0;     // the limit it was captured with
  int failed_checks = 0;  // in a row: after a few, the stack is learned again
  StackSlot slots[kMaxRememberedFrames];
};

struct RememberedStacks {
  static constexpr int kEntries = 16;
  std::uintptr_t stack_low = 0;  // the thread's pthread stack
  std::uintptr_t stack_high = 0;
  RememberedStack entries[kEntries];

  RememberedStack& entry_for(std::uintptr_t frame_address, std::uintptr_t return_address) {
    std::uint64_t h = (frame_address ^ (return_address * 0x9e3779b97f4a7c15ull)) >> 4;
    return entries[(h ^ (h >> 17)) % kEntries];
  }
};

// This thread's memory; null until its first miss (and when reuse is off).
extern thread_local RememberedStacks* t_remembered_stacks;

// Writes the remembered stack for this place to `frames` if it is still the
// stack in memory. Returns the number of frames, or -1 when it must be
// unwound.
[[gnu::always_inline]] inline int reuse_remembered_stack(std::uintptr_t frame_address,
                                                         std::uintptr_t return_address,
                                                         std::uint64_t* frames, int max_frames) {
  RememberedStacks* memory = t_remembered_stacks;
  if (!memory) return -1;
  const RememberedStack& e = memory->entry_for(frame_address, return_address);
  if (e.count < 0 || e.frame_address != frame_address || e.return_address != return_address ||
      e.max_frames != max_frames)
    return -1;
  for (int i = 0; i < e.count; ++i) {
    if (*reinterpret_cast<const volatile std::uint64_t*>(e.slots[i].address) != e.slots[i].ip)
      return -1;
  }
  for (int i = 0; i < e.count; ++i) frames[i] = e.slots[i].ip;
  return e.count;
}

// After a miss: whether this place has missed often enough that its stack
// should be learned (learn_stack) rather than just unwound.
bool should_learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address,
                        int max_frames);

// Unwinds with libunwind's step-by-step cursor, which also gives each frame's
// stack address, writes up to `max_frames` program frames to `frames` (as
// capture_native_stack does) and remembers them when every slot checks out.
int learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address, std::uint64_t* frames,
                int max_frames);

}  // namespace gpuleak::collector
