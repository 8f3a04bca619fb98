#!/usr/bin/env bash
# Builds the bundle's CUDA programs on the GPU machine when the bundle was
# made where no nvcc is (tools/make_device_bundle.sh copies them only when the
# local build has them): the CUDA examples, the client matrix's C++ programs
# and the allocation-pair benchmark, with the flags of their CMakeLists.txt.
# Usage: bash tests/gpu/build_cuda_programs.sh DIST   (quiet; says what failed)
set -u
dist=${1:?bundle folder}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "build_cuda_programs: no nvcc"; exit 1; }
mkdir -p "$dist/examples/clients" "$dist/bench"
build() {  # OUTPUT SOURCE FLAGS...
  local output=$1 source=$2; shift 2
  [ -x "$output" ] && return 0
  "$nvcc" -std=c++17 -arch=sm_90 "$@" -o "$output" "$source" > "$output.nvcc.log" 2>&1 \
    && rm -f "$output.nvcc.log" || echo "build_cuda_programs: $source failed (see $output.nvcc.log)"
}
for example in forgot_free async_leak thread_leak child_leak pinned_leak vmm_leak clean stress out_of_memory; do
  extra=()
  case $example in vmm_leak|clean) extra=(-lcuda) ;; esac
  build "$dist/examples/$example" "examples/cuda/$example.cu" -g -O1 "${extra[@]}" &
done
for program in leak_scratch_per_batch control_async_pool_per_batch; do
  build "$dist/examples/clients/$program" "examples/clients/cuda/$program.cu" -g -O1 &
done
build "$dist/bench/alloc_pairs" bench/cuda/alloc_pairs.cu -O2 -g &
wait
