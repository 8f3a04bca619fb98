// Shared by the examples: stop with a message when a CUDA call fails.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                             \
  do {                                                                          \
    cudaError_t status_ = (call);                                               \
    if (status_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(status_));                                \
      std::exit(2);                                                             \
    }                                                                           \
  } while (0)

#define CHECK_DRIVER(call)                                                      \
  do {                                                                          \
    CUresult status_ = (call);                                                  \
    if (status_ != CUDA_SUCCESS) {                                              \
      const char* text_ = nullptr;                                              \
      cuGetErrorString(status_, &text_);                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   text_ ? text_ : "unknown error");                            \
      std::exit(2);                                                             \
    }                                                                           \
  } while (0)
