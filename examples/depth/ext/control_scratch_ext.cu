// NOT A LEAK. The C++/CUDA half of control_extension_scratch_freed.py: the same extension op, whose
// scratch buffer is cudaFree'd at the end of every call (see the Python file's header for the public
// reports). Built on the GPU machine by torch.utils.cpp_extension.load (nvcc, ninja).
#include <torch/extension.h>

#include <cuda_runtime.h>

__global__ void smooth_kernel(const float* input, float* scratch, float* output, int64_t count) {
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count) return;
  scratch[i] = 0.5f * input[i];
  float left = i > 0 ? input[i - 1] : input[i];
  output[i] = scratch[i] + 0.5f * left;
}

torch::Tensor smooth(torch::Tensor input) {
  TORCH_CHECK(input.is_cuda() && input.is_contiguous() && input.scalar_type() == torch::kFloat,
              "smooth: a contiguous float32 CUDA tensor");
  const int64_t count = input.numel();
  auto output = torch::empty_like(input);
  float* scratch = nullptr;
  cudaError_t status = cudaMalloc(&scratch, count * sizeof(float));
  TORCH_CHECK(status == cudaSuccess, "cudaMalloc: ", cudaGetErrorString(status));
  smooth_kernel<<<(count + 255) / 256, 256>>>(input.data_ptr<float>(), scratch,
                                              output.data_ptr<float>(), count);
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "smooth_kernel launch failed");
  status = cudaFree(scratch);  // cudaFree waits for the kernel that uses it
  TORCH_CHECK(status == cudaSuccess, "cudaFree: ", cudaGetErrorString(status));
  return output;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("smooth", &smooth, "smooth (CUDA)"); }
