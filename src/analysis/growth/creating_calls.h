// Library calls that make a handle, plan, communicator or graph which holds
// device memory until its matching destroy call, found on an allocation's
// stack. A leak inside one is worded by the call that made it ("cublasCreate
// at solver.cu:42, never cublasDestroy'd"), not as anonymous driver memory.
//
// Also the allocation call itself for memory a program allocates directly
// (cudaMalloc, cudaMallocAsync, cuMemCreate, ...) with the call that frees it,
// for processes that run no Python and get no Python advice.
//
// Pure functions over frames; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "analysis/model/report_model.h"
#include "trace/records.h"

namespace gpuleak::analysis {

struct CreatingCall {
  std::string_view library;  // "cuBLAS"
  std::string_view create;   // "cublasCreate", as people write it
  std::string_view destroy;  // "cublasDestroy"
  std::string_view object;   // "handle", "plan", "communicator", "executable graph", ...
};

struct CreatingCallOnStack {
  const CreatingCall* call = nullptr;
  std::size_t call_frame = 0;  // index of the library function's frame
  // The frame that called it: the first frame outside the library further
  // out, the line a person changes. Absent when the stack ends there.
  std::optional<std::size_t> caller_frame;
};

// The outermost creating call on `frames` (innermost first), or nothing.
std::optional<CreatingCallOnStack> find_creating_call(const std::vector<Frame>& frames);

// A leak whose memory kind is itself a library object (an executable graph,
// recorded from cuGraphInstantiate*) when no creating call is on its stack:
// the program called the driver's entry point directly, or the runtime's
// frame has no symbol. The call is the innermost frame of the program's own
// code; nothing for other kinds or a stack without such a frame.
std::optional<CreatingCallOnStack> creating_call_of_kind(trace::MemoryKind kind,
                                                         const std::vector<Frame>& frames);

// How memory of `kind` is allocated and freed by a program that calls CUDA
// itself: {"cudaMalloc", "cudaFree"} and so on (runtime names; the driver's
// are in parentheses where they differ by more than a prefix).
struct AllocationCalls {
  std::string_view allocate;
  std::string_view release;
};
AllocationCalls allocation_calls(trace::MemoryKind kind);

// The innermost frame of the program's own code that is not inside a CUDA
// library (the line that asked for the memory), or nothing.
std::optional<std::size_t> calling_frame(const std::vector<Frame>& frames);

}  // namespace gpuleak::analysis
