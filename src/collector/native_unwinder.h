// Native call stacks of the calling thread, with libunwind's per-thread
// cache (the common case costs a hash lookup per frame, no DWARF parsing).
// No symbolization happens here: only return addresses are kept.
#pragma once

#include <cstdint>

namespace gpuleak::collector {

// Sets libunwind's caching policy; call once before the first capture.
void prepare_native_unwinder();

// The most frames a stack keeps (GPULEAK_NATIVE_DEPTH's upper bound).
constexpr int kMaxNativeFrames = 256;

// Writes up to `max_frames` return addresses, innermost first, skipping the
// frames inside the collector itself. Returns how many were written.
int capture_native_stack(std::uint64_t* frames, int max_frames);

}  // namespace gpuleak::collector
