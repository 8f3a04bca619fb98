// Native call stacks of the calling thread, with libunwind's per-thread
// cache (the common case costs a hash lookup per frame, no DWARF parsing).
// No symbolization happens here: only return addresses are kept.
#pragma once

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <cstdint>

#include "collector/remembered_stacks.h"

namespace gpuleak::collector {

// Sets libunwind's caching policy and whether stacks are remembered
// (remembered_stacks.h); call once before the first capture.
void prepare_native_unwinder(bool reuse_stacks);

// Whether stacks are remembered; prepare_native_unwinder sets it.
extern bool g_reuse_stacks;

// Whether `ip` is inside the collector's own code.
bool is_collector_frame(std::uintptr_t ip);

// How many frames of the collector's own a capture may start inside.
constexpr int kOwnFrames = 12;

// The most frames a stack keeps (GPULEAK_NATIVE_DEPTH's upper bound).
constexpr int kMaxNativeFrames = 256;

// Copies up to `max_frames` of the `count` return addresses in `raw` to
// `frames`, leaving out the leading ones inside the collector. Returns how
// many were written.
int keep_program_frames(void* const* raw, int count, std::uint64_t* frames, int max_frames);

// Writes up to `max_frames` return addresses, innermost first, skipping the
// frames inside the collector itself. Returns how many were written.
// Always inlined: the unwind starts in the caller's frame, and every frame of
// ours below the program's is one more step for the unwinder; the place a
// stack is remembered by is the caller's frame.
// `hit`, if given, says which remembered stack was reused (remembered_stacks.h).
[[gnu::always_inline]] inline int capture_native_stack(std::uint64_t* frames, int max_frames,
                                                       RememberedHit* hit = nullptr) {
  max_frames = std::min(max_frames, kMaxNativeFrames);
  std::uintptr_t frame_address = 0, return_address = 0;
  if (g_reuse_stacks) {
    frame_address = reinterpret_cast<std::uintptr_t>(__builtin_dwarf_cfa());
    return_address = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    int reused = reuse_remembered_stack(frame_address, return_address, frames, max_frames, hit);
    if (reused >= 0) return reused;
  }
  // A few extra for the collector's own frames, which are dropped.
  void* raw[kMaxNativeFrames + kOwnFrames];
  int count = unw_backtrace(raw, max_frames + kOwnFrames);
  int kept = keep_program_frames(raw, count, frames, max_frames);
  if (g_reuse_stacks && should_learn_stack(frame_address, return_address, max_frames, frames, kept))
    return learn_stack(frame_address, return_address, frames, max_frames);
  return kept;
}

}  // namespace gpuleak::collector
