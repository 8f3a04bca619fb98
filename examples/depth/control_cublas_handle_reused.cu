// NOT A LEAK: the same cuBLAS handle helper with the flag set: one handle, created on the first call
// and reused, cublasDestroy'd at exit.
//
// Sources:
//   https://github.com/mtazzari/galario/issues/104  ("Memory leak on GPU chi2Profile()": "as time passes
//       the base usage increases ... Every ~10 chi2Profile evaluations it increases by ~2MB"; the cause:
//       "initialized is never set to true ... at each call of cublas_handle() a new handle will be
//       created and assigned to the same address, which makes it impossible to free the previous one")
//   https://github.com/mtazzari/galario/pull/105  ("Fix memory leak in cublas_handle()": "After
//       implementing the change, I observe a perfectly constant memory usage")
//   https://github.com/AlexeyAB/darknet/issues/8541  ("cublasHandle_t handle = blas_handle(); will allocate
//       a device memory for this handle. But this handle didn't destroy until the program ends")
//
// What was reported: a helper meant to create one cuBLAS handle and reuse it
// guards cublasCreate with a static flag that is never set, so each call of the
// fitting function creates another handle (with its device workspace) and
// overwrites the only copy of the previous one, which can then never be
// cublasDestroy'd. Device memory grows with every evaluation until the process
// runs out.
//
// This program: the same MCMC-style loop as leak_cublas_handle_per_call.cu,
// with galario's fix: cublas_handle() sets `initialized = true` after
// cublasCreate, so every chi2() uses the one handle; main() cublasDestroys it
// before it returns.
//
// Step: one chi2() evaluation.
// Verdict: NO LEAK (one handle, created at the first step).
#include <cublas_v2.h>

#include <cstdlib>
#include <cstring>

#include "../cuda/check.h"

#define CHECK_CUBLAS(call)                                                           \
  do {                                                                               \
    cublasStatus_t status_ = (call);                                                 \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call,      \
                   static_cast<int>(status_));                                       \
      std::exit(2);                                                                  \
    }                                                                                \
  } while (0)

static cublasHandle_t cublas_handle() {
  static cublasHandle_t handle;
  static bool initialized = false;
  if (!initialized) {
    CHECK_CUBLAS(cublasCreate(&handle));
    initialized = true;
  }
  return handle;
}

__global__ void residual_kernel(const float* model, const float* data, float* residual, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) residual[i] = model[i] - data[i];
}

static float chi2(const float* model, const float* data, float* residual, int count) {
  residual_kernel<<<(count + 255) / 256, 256>>>(model, data, residual, count);
  CHECK(cudaGetLastError());
  float norm = 0.0f;
  CHECK_CUBLAS(cublasSnrm2(cublas_handle(), count, residual, 1, &norm));
  return norm * norm;
}

static int steps_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int steps = steps_from(argc, argv, 80);
  const int count = 1 << 20;
  float *model = nullptr, *data = nullptr, *residual = nullptr;
  CHECK(cudaMalloc(&model, count * sizeof(float)));
  CHECK(cudaMalloc(&data, count * sizeof(float)));
  CHECK(cudaMalloc(&residual, count * sizeof(float)));
  CHECK(cudaMemset(model, 0, count * sizeof(float)));
  CHECK(cudaMemset(data, 0, count * sizeof(float)));
  double total = 0.0;
  for (int step = 0; step < steps; ++step) total += chi2(model, data, residual, count);
  CHECK(cudaDeviceSynchronize());
  CHECK_CUBLAS(cublasDestroy(cublas_handle()));
  CHECK(cudaFree(model));
  CHECK(cudaFree(data));
  CHECK(cudaFree(residual));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("device_used_mib=%.1f\n", (total_bytes - free_bytes) / 1048576.0);
  std::printf("steps=%d chi2_total=%.1f\n", steps, total);
  return 0;
}
