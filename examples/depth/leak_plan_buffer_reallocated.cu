// A plan object whose set-points call cudaMallocs its point buffer again on every call, overwriting the
// pointer: only the last buffer is freed when the plan is destroyed.
//
// Sources:
//   https://github.com/flatironinstitute/cufinufft/pull/74  ("Fix memory leak": "The main leak was due to
//       d_plan->c being cudaMalloc'ed but never cudaFree'd ... and adds a few guards against potential
//       memory leaks when the plan gets executed several times without destroying it first.")
//   https://github.com/flatironinstitute/cufinufft/issues/75  ("GPU memory leak issue?": "I am trying to
//       invoke the cunufft in C++ time and time again, but the monitor for NVIDIA tool NVTOP shows the gpu
//       memory is keep growing.")
//   https://github.com/ginkgo-project/ginkgo/pull/647  ("Fix cuSPARSE CsrEx benchmark memory leak": "The
//       CsrEx wrapper allocates memory in each apply operation, but only frees the last allocation in the
//       destructor.")
//
// What was reported: a library's plan (a prepared object, made once and used
// many times) allocates its device buffers inside the per-call function and
// stores them in a member, without freeing what the member held before;
// destroying the plan frees only the last buffer. A C++ loop that sets new
// points on one plan leaks one buffer per call.
//
// This program: a nonuniform-FFT-style plan is made once; each step sets a new
// batch of 262,144 points on it (set_points() cudaMallocs plan->c, overwriting
// the previous pointer) and executes it. plan_destroy() at the end frees the
// last buffer only.
//
// Step: one set_points() + execute() call.
// Leak: 262,144 x sizeof(float2) = 2,097,152 bytes per step (the overwritten plan->c).
// Creating API: cudaMalloc into the plan's member (set_points, marked KEEP); matching release: cudaFree
//   of the old buffer (or reuse it when the size is unchanged).
// Fix: in set_points(), cudaFree(plan->c) before allocating (or keep the buffer when it is large enough).
#include <cstdlib>
#include <cstring>

#include "../cuda/check.h"

struct Plan {
  int modes = 0;
  float2* fk = nullptr;  // the plan's output grid, allocated once in plan_make
  float2* c = nullptr;   // strengths at the current points, (re)allocated in set_points
  int points = 0;
};

static Plan* plan_make(int modes) {
  Plan* plan = new Plan;
  plan->modes = modes;
  CHECK(cudaMalloc(&plan->fk, modes * sizeof(float2)));
  return plan;
}

static void set_points(Plan* plan, int points) {
  plan->points = points;
  CHECK(cudaMalloc(&plan->c, points * sizeof(float2)));  // KEEP: overwrites plan->c, the old buffer is lost
  CHECK(cudaMemset(plan->c, 0, points * sizeof(float2)));
}

__global__ void spread_kernel(const float2* c, int points, float2* fk, int modes) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < points) {
    float2 value = c[i];
    atomicAdd(&fk[i % modes].x, value.x + 1.0f);
  }
}

static void execute(Plan* plan) {
  spread_kernel<<<(plan->points + 255) / 256, 256>>>(plan->c, plan->points, plan->fk, plan->modes);
  CHECK(cudaGetLastError());
}

static void plan_destroy(Plan* plan) {
  CHECK(cudaFree(plan->c));
  CHECK(cudaFree(plan->fk));
  delete plan;
}

static int steps_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int steps = steps_from(argc, argv, 150);
  Plan* plan = plan_make(1 << 16);
  for (int step = 0; step < steps; ++step) {
    set_points(plan, 1 << 18);
    execute(plan);
  }
  CHECK(cudaDeviceSynchronize());
  plan_destroy(plan);
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("device_used_mib=%.1f\n", (total_bytes - free_bytes) / 1048576.0);
  std::printf("steps=%d\n", steps);
  return 0;
}
