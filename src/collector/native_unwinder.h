// Native call stacks of the calling thread, with libunwind's per-thread
// cache (the common case costs a hash lookup per frame, no DWARF parsing).
// No symbolization happens here: only return addresses are kept.
#pragma once

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <cstdint>

namespace gpuleak::collector {

// Sets libunwind's caching policy; call once before the first capture.
void prepare_native_unwinder();

// The most frames a stack keeps (GPULEAK_NATIVE_DEPTH's upper bound).
constexpr int kMaxNativeFrames = 256;

// Copies up to `max_frames` of the `count` return addresses in `raw` to
// `frames`, leaving out the leading ones inside the collector. Returns how
// many were written.
int keep_program_frames(void* const* raw, int count, std::uint64_t* frames, int max_frames);

// Writes up to `max_frames` return addresses, innermost first, skipping the
// frames inside the collector itself. Returns how many were written.
// Always inlined: the unwind starts in the caller's frame, and every frame of
// ours below the program's is one more step for the unwinder.
[[gnu::always_inline]] inline int capture_native_stack(std::uint64_t* frames, int max_frames) {
  // A few extra for the collector's own frames, which are dropped.
  constexpr int kOwnFrames = 12;
  void* raw[kMaxNativeFrames + kOwnFrames];
  int count = unw_backtrace(raw, std::min(max_frames, kMaxNativeFrames) + kOwnFrames);
  return keep_program_frames(raw, count, frames, max_frames);
}

}  // namespace gpuleak::collector
