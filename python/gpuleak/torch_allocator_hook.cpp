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
// PyTorch (beyond reading which autograd node this thread runs, a thread-
// local), and the collector functions it calls never do.
//
// A block allocated during a backward pass is forwarded with the class of
// the autograd node that runs (torch::autograd::get_current_node(), found
// at attach time; absent in a torch without it): the collector then names
// the node instead of unwinding the engine thread's native stack.
#include <c10/cuda/CUDACachingAllocator.h>
#include <dlfcn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

namespace torch::autograd {
struct Node;
}

namespace {

using AllocFn = void (*)(std::uint64_t address, std::uint64_t size, int device,
                         std::uint64_t stream);
using FreeFn = void (*)(std::uint64_t address, int device);
using AllocInNodeFn = void (*)(std::uint64_t address, std::uint64_t size, int device,
                               std::uint64_t stream, std::uint64_t node_type);
using CurrentNodeFn = std::shared_ptr<torch::autograd::Node> (*)();

// torch::autograd::get_current_node(), exported by libtorch_cpu (already
// loaded by the torch that attaches this tracker), or null.
CurrentNodeFn find_current_node() {
  void* torch_cpu = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
  if (!torch_cpu) return nullptr;
  void* symbol = dlsym(torch_cpu, "_ZN5torch8autograd16get_current_nodeEv");
  dlclose(torch_cpu);  // the NOLOAD handle's own reference; torch keeps it loaded
  return reinterpret_cast<CurrentNodeFn>(symbol);
}

// The class of the node this thread's backward is running, as the address of
// its vtable (a node is polymorphic: the vtable pointer is its first word);
// 0 outside a backward pass.
std::uint64_t running_node_type(CurrentNodeFn current_node) {
  std::shared_ptr<torch::autograd::Node> node = current_node();
  if (!node) return 0;
  return *reinterpret_cast<const std::uint64_t*>(node.get());
}

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

// `alloc_in_node_fn` may be null (a collector without it): backward
// allocations then go to `alloc_fn` like the others.
extern "C" int gpuleak_attach_torch_tracker(void* alloc_fn, void* free_fn, void* alloc_in_node_fn) {
  if (!alloc_fn || !free_fn) return 0;
  auto on_alloc = reinterpret_cast<AllocFn>(alloc_fn);
  auto on_free = reinterpret_cast<FreeFn>(free_fn);
  auto on_alloc_in_node = reinterpret_cast<AllocInNodeFn>(alloc_in_node_fn);
  CurrentNodeFn current_node = on_alloc_in_node ? find_current_node() : nullptr;
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
        Tracker([on_alloc, on_free, on_alloc_in_node, current_node](const Entry& entry) {
          switch (entry.action_) {
            case Entry::ALLOC: {
              // The entry carries the requested size; the block the
              // allocator hands out (and that stays held) is rounded up to
              // its 512-byte granularity.
              std::uint64_t size = round_to_block(entry.size_);
              std::uint64_t node_type = current_node ? running_node_type(current_node) : 0;
              if (node_type != 0) {
                on_alloc_in_node(entry.addr_, size, static_cast<int>(entry.device_),
                                 stream_id(entry.stream_), node_type);
              } else {
                on_alloc(entry.addr_, size, static_cast<int>(entry.device_),
                         stream_id(entry.stream_));
              }
              break;
            }
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
