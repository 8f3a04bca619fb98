#!/usr/bin/env bash
# First look at the GPU machine (run through the device tool with dist/
# carried): what is installed, whether the collector loads and sees
# allocations in every CUDA example, what it costs on allocate/free pairs,
# and how the PyTorch tracking modes compare on step time.
# Writes everything under $OUT; the traces come back for offline analysis.
set -u
OUT=${OUT:?set OUT}
D=$PWD/dist
COLLECTOR=$D/lib/libgpuleak_collector.so
mkdir -p "$OUT/traces" "$OUT/bench"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  cat /etc/os-release | head -2
  ldd --version | head -1
  g++ --version | head -1
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"
  python3 -c "import torch.utils.cpp_extension as c; print(c.include_paths(device_type='cuda'))" 2>&1 | tail -1
  which compute-sanitizer nvcc cmake
  ls /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 2>/dev/null | grep -i cupti
  python3 -c "import nvidia, os; print(nvidia.__path__)" 2>&1 | tail -1
  ldd "$COLLECTOR"
} > "$OUT/env.txt" 2>&1

for ex in forgot_free async_leak thread_leak child_leak pinned_leak vmm_leak clean out_of_memory stress; do
  mkdir -p "$OUT/traces/$ex"
  start=$(date +%s%N)
  CUDA_INJECTION64_PATH=$COLLECTOR GPULEAK_TRACE_DIR=$OUT/traces/$ex GPULEAK_VERBOSE=1 \
    timeout 120 "$D/examples/$ex" > "$OUT/traces/$ex/output.txt" 2>&1
  rc=$?
  echo "$ex rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$OUT/examples.txt"
done
start=$(date +%s%N); timeout 120 "$D/examples/stress" > /dev/null 2>&1
echo "stress-native rc=$? ms=$(( ($(date +%s%N) - start) / 1000000 ))" >> "$OUT/examples.txt"

B=$D/bench/alloc_pairs
timeout 60 "$B" 7 20000 500 > "$OUT/bench/pairs_native.json" 2>&1
CUDA_INJECTION64_PATH=$COLLECTOR GPULEAK_TRACE_DIR=/tmp/pairs1 timeout 60 "$B" 7 20000 500 > "$OUT/bench/pairs_gpuleak.json" 2>&1
CUDA_INJECTION64_PATH=$COLLECTOR GPULEAK_TRACE_DIR=/tmp/pairs2 GPULEAK_NATIVE_DEPTH=0 timeout 60 "$B" 7 20000 500 > "$OUT/bench/pairs_gpuleak_nostacks.json" 2>&1
timeout 60 "$B" 7 20000 500 > "$OUT/bench/pairs_native2.json" 2>&1
timeout 150 compute-sanitizer --tool memcheck --leak-check full "$B" 3 5000 100 > "$OUT/bench/pairs_sanitizer.txt" 2>&1
ls -la /tmp/pairs1 >> "$OUT/bench/trace_sizes.txt" 2>&1

export GPULEAK_PYTHON_DIR=$D/python GPULEAK_COLLECTOR=$COLLECTOR GPULEAK_CACHE_DIR=/tmp/gpuleak-cache
run_torch() {  # name, env..., -- args
  local name=$1; shift
  env "$@" timeout 180 python3 bench/torch/step_time.py $TORCH_ARGS > "$OUT/bench/torch_$name.json" 2> "$OUT/bench/torch_$name.err"
}
for model in mlp transformer; do
  if [ $model = mlp ]; then TORCH_ARGS="--model mlp --steps 300 --rounds 5"; else TORCH_ARGS="--model transformer --steps 20 --rounds 3 --warmup 5"; fi
  run_torch ${model}_native X=1
  run_torch ${model}_async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  run_torch ${model}_async_injected PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync CUDA_INJECTION64_PATH=$COLLECTOR GPULEAK_TRACE_DIR=$OUT/traces/torch_${model}_async
  run_torch ${model}_injected CUDA_INJECTION64_PATH=$COLLECTOR GPULEAK_TRACE_DIR=/tmp/t_${model}_inj
  TORCH_ARGS="$TORCH_ARGS --mode hook" run_torch ${model}_hook CUDA_INJECTION64_PATH=$COLLECTOR GPULEAK_TRACE_DIR=$OUT/traces/torch_${model}_hook
  TORCH_ARGS="$TORCH_ARGS --mode history" run_torch ${model}_history X=1
  run_torch ${model}_native2 X=1
done
ls -la $OUT/traces/torch_* > "$OUT/bench/torch_trace_sizes.txt" 2>&1
echo probe done
