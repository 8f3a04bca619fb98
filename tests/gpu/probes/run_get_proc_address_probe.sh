#!/usr/bin/env bash
# Runs get_proc_address_probe.so (built here into dist/probe/, see its header)
# under a CUDA C++ program with the runtime linked statically, PyTorch with
# its cudaMallocAsync backend, and CuPy's stream-ordered pool.
set -u
cupti_dir=$(dirname "$(find / -name 'libcupti.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$cupti_dir:${LD_LIBRARY_PATH:-}" CUDA_INJECTION64_PATH=$PWD/dist/probe/get_proc_address_probe.so
echo "== alloc_pairs (static cudart)"; dist/bench/alloc_pairs 1 100 5 > /dev/null
echo "== torch, cudaMallocAsync backend"
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 -c "import torch; x = torch.empty(1 << 20, device='cuda'); del x; torch.cuda.synchronize()"
echo "== cupy, MemoryAsyncPool"
python3 -c "import cupy; cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc); a = cupy.zeros(1 << 20); del a; cupy.cuda.Device().synchronize()"
