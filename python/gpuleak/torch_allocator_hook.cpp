// Attaches a trace tracker to PyTorch's CUDA caching allocator and forwards
// every block handed to a tensor (ALLOC) and every free request
// (FREE_REQUESTED) to the gpuleak collector.
//
// It is compiled against the torch that is installed, the first time it is
// needed (see torch_hook.py), because the allocator's C++ types differ between
// torch versions. The types are deduced from attachAllocatorTraceTracker's
// own signature so the same source builds against several versions.
//
// The tracker runs with the allocator's lock held: it must not call into
// PyTorch, and the collector function it calls never does.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdint>
#include <functional>
#include <type_traits>

namespace {

using AllocFn = void (*)(std::uint64_t address, std::uint64_t size, int device,
                         std::uint64_t stream);
using FreeFn = void (*)(std::uint64_t address, int device);

template <class F>
struct first_parameter;
template <class R, class A>
struct first_parameter<R (*)(A)> {
  using type = std::decay_t<A>;
};
template <class R, class A>
struct first_parameter<std::function<R(A)>> {
  using type = std::decay_t<A>;
};

using Tracker = typename first_parameter<
    decltype(&c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker)>::type;
using Entry = typename first_parameter<Tracker>::type;

template <class S>
std::uint64_t stream_id(const S& stream) {
  if constexpr (std::is_pointer_v<S>) {
    return reinterpret_cast<std::uintptr_t>(stream);
  } else if constexpr (requires { stream.id(); }) {
    return static_cast<std::uint64_t>(stream.id());
  } else {
    return 0;
  }
}

// PyTorch's caching allocator never hands out less than, nor other than a
// multiple of, 512 bytes (kMinBlockSize).
std::uint64_t round_to_block(std::uint64_t size) {
  return size == 0 ? 512 : (size + 511) / 512 * 512;
}

}  // namespace

extern "C" int gpuleak_attach_torch_tracker(void* alloc_fn, void* free_fn) {
  if (!alloc_fn || !free_fn) return 0;
  auto on_alloc = reinterpret_cast<AllocFn>(alloc_fn);
  auto on_free = reinterpret_cast<FreeFn>(free_fn);
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
        Tracker([on_alloc, on_free](const Entry& entry) {
          switch (entry.action_) {
            case Entry::ALLOC:
              // The entry carries the requested size; the block the
              // allocator hands out (and that stays held) is rounded up to
              // its 512-byte granularity.
              on_alloc(entry.addr_, round_to_block(entry.size_), static_cast<int>(entry.device_),
                       stream_id(entry.stream_));
              break;
            case Entry::FREE_REQUESTED:
              on_free(entry.addr_, static_cast<int>(entry.device_));
              break;
            default:
              break;
          }
        }));
  } catch (...) {
    return 0;
  }
  return 1;
}
