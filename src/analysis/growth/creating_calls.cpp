#include "analysis/growth/creating_calls.h"

#include <array>

namespace gpuleak::analysis {

namespace {

// Matched by prefix on the frame's function name, so that versioned and
// per-rank variants (cublasCreate_v2, cufftPlan2d, ncclCommInitRankConfig)
// find their family. Order: a longer prefix before a shorter one it starts with.
struct Pattern {
  std::string_view prefix;
  CreatingCall call;
};

constexpr std::array kPatterns{
    Pattern{"cublasLtCreate", {"cuBLASLt", "cublasLtCreate", "cublasLtDestroy", "handle"}},
    Pattern{"cublasXtCreate", {"cuBLASXt", "cublasXtCreate", "cublasXtDestroy", "handle"}},
    Pattern{"cublasCreate", {"cuBLAS", "cublasCreate", "cublasDestroy", "handle"}},
    Pattern{"cufftMakePlan", {"cuFFT", "cufftMakePlan", "cufftDestroy", "plan"}},
    Pattern{"cufftPlan", {"cuFFT", "cufftPlan", "cufftDestroy", "plan"}},
    Pattern{"cudnnCreate", {"cuDNN", "cudnnCreate", "cudnnDestroy", "handle"}},
    Pattern{"cusparseCreate", {"cuSPARSE", "cusparseCreate", "cusparseDestroy", "handle"}},
    Pattern{"cusolverDnCreate", {"cuSOLVER", "cusolverDnCreate", "cusolverDnDestroy", "handle"}},
    Pattern{"cusolverSpCreate", {"cuSOLVER", "cusolverSpCreate", "cusolverSpDestroy", "handle"}},
    Pattern{"curandCreateGenerator",
            {"cuRAND", "curandCreateGenerator", "curandDestroyGenerator", "generator"}},
    Pattern{"cutensorCreate", {"cuTENSOR", "cutensorCreate", "cutensorDestroy", "handle"}},
    Pattern{"ncclCommInit", {"NCCL", "ncclCommInitRank", "ncclCommDestroy", "communicator"}},
    Pattern{"ncclCommSplit", {"NCCL", "ncclCommSplit", "ncclCommDestroy", "communicator"}},
    Pattern{"cudaGraphInstantiate",
            {"CUDA graphs", "cudaGraphInstantiate", "cudaGraphExecDestroy", "executable graph"}},
    Pattern{"cuGraphInstantiate",
            {"CUDA graphs", "cuGraphInstantiate", "cuGraphExecDestroy", "executable graph"}},
    Pattern{"cudaStreamCreate", {"CUDA", "cudaStreamCreate", "cudaStreamDestroy", "stream"}},
    Pattern{"cuStreamCreate", {"CUDA", "cuStreamCreate", "cuStreamDestroy", "stream"}},
    Pattern{"cudaEventCreate", {"CUDA", "cudaEventCreate", "cudaEventDestroy", "event"}},
    Pattern{"cuEventCreate", {"CUDA", "cuEventCreate", "cuEventDestroy", "event"}},
    Pattern{"cudaMemPoolCreate",
            {"CUDA", "cudaMemPoolCreate", "cudaMemPoolDestroy", "memory pool"}},
    Pattern{"cuMemPoolCreate", {"CUDA", "cuMemPoolCreate", "cuMemPoolDestroy", "memory pool"}},
};

const Pattern* pattern_of(std::string_view function) {
  for (const Pattern& p : kPatterns) {
    if (function.starts_with(p.prefix)) return &p;
  }
  return nullptr;
}

// Frames of CUDA's own libraries, where the user's line is never found.
bool in_cuda_library(const Frame& f) {
  std::string_view module = f.module;
  std::size_t slash = module.rfind('/');
  if (slash != std::string_view::npos) module.remove_prefix(slash + 1);
  for (std::string_view lib :
       {"libcublas", "libcufft", "libcudnn", "libcusparse", "libcusolver", "libcurand",
        "libcutensor", "libnccl", "libcudart", "libcuda.", "libnvrtc", "libnvJitLink"}) {
    if (module.starts_with(lib)) return true;
  }
  return false;
}

}  // namespace

std::optional<CreatingCallOnStack> find_creating_call(const std::vector<Frame>& frames) {
  std::optional<CreatingCallOnStack> found;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (frames[i].language != Frame::Language::kNative) break;
    if (const Pattern* p = pattern_of(frames[i].function)) {
      // Keep going: cufftPlan2d calls cufftMakePlan2d; the outer one is the call made.
      found = CreatingCallOnStack{&p->call, i, std::nullopt};
    }
  }
  if (!found) return found;
  // The program's own line first (a frame outside CUDA, PyTorch and Python:
  // the user's dist.new_group(...) rather than c10d::NCCLComm::create), else
  // the first frame outside the CUDA libraries.
  std::optional<std::size_t> outside_cuda;
  for (std::size_t i = found->call_frame + 1; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    if (pattern_of(f.function) || in_cuda_library(f) || f.plumbing) continue;
    if (!outside_cuda) outside_cuda = i;
    if (!f.internal) {
      found->caller_frame = i;
      return found;
    }
  }
  found->caller_frame = outside_cuda;
  return found;
}

std::optional<std::size_t> calling_frame(const std::vector<Frame>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    if (f.plumbing || f.internal || in_cuda_library(f) || f.file.empty()) continue;
    return i;
  }
  return std::nullopt;
}

std::optional<CreatingCallOnStack> creating_call_of_kind(trace::MemoryKind kind,
                                                         const std::vector<Frame>& frames) {
  if (kind != trace::MemoryKind::kGraphExec) return std::nullopt;
  std::optional<std::size_t> caller = calling_frame(frames);
  if (!caller) return std::nullopt;
  const Pattern* graphs = pattern_of("cudaGraphInstantiate");
  return CreatingCallOnStack{&graphs->call, *caller, caller};
}

AllocationCalls allocation_calls(trace::MemoryKind kind) {
  using trace::MemoryKind;
  switch (kind) {
    case MemoryKind::kDeviceAsync:
      return {"cudaMallocAsync", "cudaFreeAsync"};
    case MemoryKind::kManaged:
      return {"cudaMallocManaged", "cudaFree"};
    case MemoryKind::kHostPinned:
      return {"cudaMallocHost", "cudaFreeHost"};
    case MemoryKind::kVmmPhysical:
      return {"cuMemCreate", "cuMemRelease"};
    case MemoryKind::kVmmMapping:
      return {"cuMemMap", "cuMemUnmap"};
    case MemoryKind::kAddressRange:
      return {"cuMemAddressReserve", "cuMemAddressFree"};
    case MemoryKind::kArray:
      return {"cudaMallocArray", "cudaFreeArray"};
    case MemoryKind::kGraphExec:
      return {"cudaGraphInstantiate", "cudaGraphExecDestroy"};
    case MemoryKind::kDevice:
    case MemoryKind::kTorchBlock:
      break;
  }
  return {"cudaMalloc", "cudaFree"};
}

}  // namespace gpuleak::analysis
