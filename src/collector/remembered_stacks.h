// A per-thread memory of recently unwound native stacks, so that a loop which
// allocates from a few places is unwound once per place instead of on every
// call.
//
// A capture starts at a *place*: the capturing function's canonical frame
// address and return address. Real programs reach one place from many call
// sites (every allocation of a program through one wrapper, every tensor
// through PyTorch's allocator hook), so a place remembers up to
// kMaxRememberedStacks stacks, its *candidates*. They share their innermost
// slots (the wrapper's own frames) up to the place's *split*, the first slot
// where they differ; the return address found in that slot picks the
// candidate, whose remaining slots are then checked. A capture costs one
// read per frame whether the place has one candidate or sixty.
//
// A remembered stack is reused when every one of its return addresses still
// sits in the stack slot it was read from. For frames whose size is fixed at
// each instruction, which is all compiled code that does not use alloca or
// variable-length arrays, that proves the stack is the same: a frame's slot
// follows from the previous frame's address and return address, and the
// check reads them in that order. A frame that changes size between calls
// could, with stale memory holding the old return addresses, let a different
// stack pass the check; GPULEAK_REUSE_STACKS=0 turns reuse off.
//
// Learning a stack (unwinding it frame by frame to find its slots) costs
// several plain unwinds, so a stack is learned the second time it is seen
// at a place, and a place where learning does not pay (more stacks taking
// turns than it can remember, each evicted before it is seen again) stops
// learning for a while and unwinds plainly: reuse never costs more than a
// plain unwind and a few comparisons.
//
// Only stacks inside the thread's own pthread stack are remembered: every
// slot is then above the current stack pointer of a later capture with the
// same frame address, so reading it cannot fault (a fiber's or signal
// stack's captures are always unwound). A capture made while the thread is
// inside this memory already (a signal handler interrupting a capture) is
// unwound plainly and leaves the memory alone.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpuleak::collector {

// Longer stacks are always unwound.
constexpr int kMaxRememberedFrames = 64;
// Stacks a thread remembers, over all its places.
constexpr int kMaxRememberedStacks = 64;
// Places a thread remembers.
constexpr int kMaxRememberedPlaces = 8;

struct StackSlot {
  std::uintptr_t address;  // where the return address was read
  std::uint64_t ip;        // the return address
};

struct RememberedStack {
  int count = 0;  // slots; 0 while the entry is free
  int place = -1;
  std::uint64_t last_used = 0;
  // The stack table's id of these frames alone (no Python frames), once a
  // capture that reused them has looked it up; 0 until then. A stack id
  // never changes once given, so a reuse skips hashing the frames and the
  // table's lookup.
  std::uint32_t stack_id = 0;
  StackSlot slots[kMaxRememberedFrames];
};

struct RememberedPlace {
  std::uintptr_t frame_address = 0;  // the capturing function's canonical frame address
  std::uintptr_t return_address = 0;
  int max_frames = 0;  // the limit its stacks were captured with
  bool in_use = false;
  std::uint64_t last_used = 0;
  // Candidates: every one has the same slots [0, split); each has slots
  // beyond it, and its return address in slot `split` is split_ips[i].
  int candidates = 0;
  int split = 0;
  std::uint8_t entries[kMaxRememberedStacks];
  std::uint64_t split_ips[kMaxRememberedStacks];
  // Whether learning pays here, over windows of captures.
  std::uint32_t hits = 0, misses = 0, learned = 0;
  std::uint32_t paused_windows = 0;  // windows left without learning
  // Hashes of stacks unwound here once (learned when seen again).
  static constexpr int kSeen = 64;
  std::uint64_t seen[kSeen] = {};
};

struct RememberedStacks {
  std::uintptr_t stack_low = 0;  // the thread's pthread stack
  std::uintptr_t stack_high = 0;
  bool busy = false;  // a capture is using the memory (see the header comment)
  std::uint64_t clock = 0;
  RememberedPlace places[kMaxRememberedPlaces];
  RememberedStack stacks[kMaxRememberedStacks];
};

// This thread's memory; null until its first miss (and when reuse is off).
extern thread_local RememberedStacks* t_remembered_stacks;

// Which remembered stack a capture reused, so the stack id found for its
// frames can be kept with it (remember_stack_id). `stamp` is the entry's
// last_used at the reuse: any later use or replacement of the entry changes
// it, and the id is then not written.
struct RememberedHit {
  int entry = -1;  // -1: the stack was unwound, not reused
  std::uint64_t stamp = 0;
  std::uint32_t stack_id = 0;  // the id kept with the entry, or 0
};

// Writes the remembered stack for this place to `frames` if one is still the
// stack in memory. Returns the number of frames, or -1 when it must be
// unwound.
[[gnu::always_inline]] inline int reuse_remembered_stack(std::uintptr_t frame_address,
                                                         std::uintptr_t return_address,
                                                         std::uint64_t* frames, int max_frames,
                                                         RememberedHit* hit = nullptr) {
  RememberedStacks* memory = t_remembered_stacks;
  if (!memory || memory->busy) return -1;
  RememberedPlace* place = nullptr;
  for (RememberedPlace& p : memory->places) {
    if (p.candidates > 0 && p.frame_address == frame_address &&
        p.return_address == return_address && p.max_frames == max_frames) {
      place = &p;
      break;
    }
  }
  if (!place) return -1;
  memory->busy = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  auto holds = [](const StackSlot& s) {
    // The slot's address is a stack address read from memory, not a pointer
    // the compiler could track: the cast is the point.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    return *reinterpret_cast<const volatile std::uint64_t*>(s.address) == s.ip;
  };
  int found = -1;
  const RememberedStack& first = memory->stacks[place->entries[0]];
  bool shared = true;
  for (int i = 0; i < place->split; ++i) {
    if (!holds(first.slots[i])) {
      shared = false;
      break;
    }
  }
  if (shared) {
    if (place->split == first.count) {
      found = place->entries[0];  // one candidate, checked whole
    } else {
      const auto split_address = first.slots[place->split].address;
      // NOLINTNEXTLINE(performance-no-int-to-ptr): a stack slot's address, as above
      std::uint64_t split_ip = *reinterpret_cast<const volatile std::uint64_t*>(split_address);
      for (int c = 0; c < place->candidates && found < 0; ++c) {
        if (place->split_ips[c] != split_ip) continue;
        const RememberedStack& e = memory->stacks[place->entries[c]];
        bool all = true;
        for (int i = place->split + 1; i < e.count && all; ++i) all = holds(e.slots[i]);
        if (all) found = place->entries[c];
      }
    }
  }
  int count = -1;
  if (found >= 0) {
    RememberedStack& e = memory->stacks[found];
    for (int i = 0; i < e.count; ++i) frames[i] = e.slots[i].ip;
    e.last_used = ++memory->clock;
    place->last_used = memory->clock;
    ++place->hits;
    count = e.count;
    if (hit) *hit = RememberedHit{found, e.last_used, e.stack_id};
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  memory->busy = false;
  return count;
}

// Keeps `stack_id` with the stack a capture reused, unless the entry was
// used or replaced since (a capture from a signal handler in between).
void remember_stack_id(const RememberedHit& hit, std::uint32_t stack_id);

// After a miss, with the stack unwound plainly in `frames`: whether it
// should be learned (learn_stack) now.
bool should_learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address, int max_frames,
                        const std::uint64_t* frames, int count);

// Unwinds with libunwind's step-by-step cursor, which also gives each frame's
// stack address, writes up to `max_frames` program frames to `frames` (as
// capture_native_stack does) and remembers them when every slot checks out.
int learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address, std::uint64_t* frames,
                int max_frames);

}  // namespace gpuleak::collector
