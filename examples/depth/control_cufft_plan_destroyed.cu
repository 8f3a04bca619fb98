// NOT A LEAK: a cuFFT plan made for every frame and cufftDestroy'd at the end of the frame.
//
// Sources:
//   https://github.com/NVIDIA/open-gpu-kernel-modules/issues/674  ("Cufft GPU memoey increase": "When I loop
//       through the following code, the GPU memory continues to increase 0.7G-->0.8G-------->1.6G"; the
//       loop makes a cuFFT plan for a 512-wide frame on every iteration)
//   https://github.com/microsoft/onnxruntime/pull/26098  ("CuFFTPlanCache: add destructor and Clear() for
//       memory release": "cuFFT plans and their GPU workspaces could remain allocated ... Clear() destroys
//       cuFFT plans and frees workspace memory (calls cufftDestroy and cudaFree)")
//
// What was reported: a loop that creates a cuFFT plan on every iteration (same
// size each time), executes it, and never calls cufftDestroy: every plan keeps
// the work area cuFFT allocated for it, and device memory climbs until the
// process is out of it.
//
// This program: the same frame loop as leak_cufft_plan_per_frame.cu; the plan
// is still made per frame (the cost the report's loop pays), and the frame
// ends with cufftDestroy(plan), which frees the plan's work area.
//
// Step: one frame.
// Verdict: NO LEAK.
#include <cufft.h>

#include <cstdlib>
#include <cstring>

#include "../cuda/check.h"

#define CHECK_CUFFT(call)                                                             \
  do {                                                                                \
    cufftResult status_ = (call);                                                     \
    if (status_ != CUFFT_SUCCESS) {                                                   \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call,       \
                   static_cast<int>(status_));                                        \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)

constexpr int kSamples = 1 << 20;  // one frame: 2,048 lines of 512 samples, transformed as one signal

__global__ void low_pass(cufftComplex* spectrum, int samples) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < samples && i > samples / 4 && i < samples - samples / 4) spectrum[i] = make_cuComplex(0.0f, 0.0f);
}

static void filter_frame(cufftComplex* frame) {
  cufftHandle plan;
  CHECK_CUFFT(cufftPlan1d(&plan, kSamples, CUFFT_C2C, 1));
  CHECK_CUFFT(cufftExecC2C(plan, frame, frame, CUFFT_FORWARD));
  low_pass<<<(kSamples + 255) / 256, 256>>>(frame, kSamples);
  CHECK(cudaGetLastError());
  CHECK_CUFFT(cufftExecC2C(plan, frame, frame, CUFFT_INVERSE));
  CHECK_CUFFT(cufftDestroy(plan));
}

static int steps_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int steps = steps_from(argc, argv, 150);
  cufftComplex* frame = nullptr;
  CHECK(cudaMalloc(&frame, sizeof(cufftComplex) * kSamples));
  for (int step = 0; step < steps; ++step) {
    CHECK(cudaMemset(frame, step & 0xff, sizeof(cufftComplex) * kSamples));
    filter_frame(frame);
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(frame));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("device_used_mib=%.1f\n", (total_bytes - free_bytes) / 1048576.0);
  std::printf("steps=%d\n", steps);
  return 0;
}
