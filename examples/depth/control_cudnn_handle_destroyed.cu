// NOT A LEAK: a cuDNN handle per worker thread, cudnnDestroy'd before the thread exits.
//
// Sources:
//   https://github.com/jolibrain/caffe/issues/63  ("GPU memory leak with cudnn": "CUDNN version of some caffe
//       operations leak a lot of memory. Leaked memory is allocated during cudnnCreate(&handle_)")
//   https://github.com/apache/tvm/pull/8267  (the thread-local cuDNN handle discussion: "in TVM this handler
//       is called on threads' exit (thread_local lifetime). So the leak might be significant if TVM kills
//       and re-creates many threads during the whole program.")
//   https://github.com/flashlight/flashlight/issues/466  ("NO_CUDNN_DESTROY_HANDLE issue": with the destroy
//       compiled out, "I can see there are memory leaks ... by 0x22437FD7: cudnnCreate")
//
// What was reported: code that gives each thread its own cuDNN handle (cuDNN
// asks that threads not share one) and skips cudnnDestroy -- to dodge crashes
// at exit, or because the handle's owner never runs a destructor -- leaks one
// handle per thread; cudnnCreate allocates device memory for the handle (its
// internal cuBLAS context among it). A program that starts a new worker thread
// per batch leaks at that rate.
//
// This program: the same thread-per-batch loop as
// leak_cudnn_handle_per_thread.cu; each worker cudnnDestroys its handle before
// it exits, so the handle's device memory is freed with the thread.
//
// Step: one batch (one worker thread).
// Verdict: NO LEAK.
#include <cudnn.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "../cuda/check.h"

#define CHECK_CUDNN(call)                                                             \
  do {                                                                                \
    cudnnStatus_t status_ = (call);                                                   \
    if (status_ != CUDNN_STATUS_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
                   cudnnGetErrorString(status_));                                     \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)

constexpr int kN = 64, kC = 64, kH = 56, kW = 56;

static void process_batch(float* activations) {
  cudnnHandle_t handle;
  CHECK_CUDNN(cudnnCreate(&handle));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDNN(cudnnSetStream(handle, stream));
  cudnnTensorDescriptor_t tensor;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&tensor));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(tensor, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kN, kC, kH, kW));
  cudnnActivationDescriptor_t relu;
  CHECK_CUDNN(cudnnCreateActivationDescriptor(&relu));
  CHECK_CUDNN(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  const float one = 1.0f, zero = 0.0f;
  CHECK_CUDNN(cudnnActivationForward(handle, relu, &one, tensor, activations, &zero, tensor, activations));
  CHECK(cudaStreamSynchronize(stream));
  CHECK_CUDNN(cudnnDestroyActivationDescriptor(relu));
  CHECK_CUDNN(cudnnDestroyTensorDescriptor(tensor));
  CHECK_CUDNN(cudnnDestroy(handle));
  CHECK(cudaStreamDestroy(stream));
}

static int steps_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int steps = steps_from(argc, argv, 80);
  float* activations = nullptr;
  const size_t bytes = sizeof(float) * kN * kC * kH * kW;
  CHECK(cudaMalloc(&activations, bytes));
  CHECK(cudaMemset(activations, 0, bytes));
  for (int step = 0; step < steps; ++step) {
    std::thread worker(process_batch, activations);
    worker.join();
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(activations));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("device_used_mib=%.1f\n", (total_bytes - free_bytes) / 1048576.0);
  std::printf("steps=%d\n", steps);
  return 0;
}
