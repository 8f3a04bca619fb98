# Shared start of the tests/gpu/run_part_*.sh scripts (sourced, not run).
# Usage: PART=x; source tests/gpu/common.sh
# Gives R (the results folder $OUT/results-$PART), D (the carried dist/), log
# (timestamped, also into $R/log.txt), and packs $R into $OUT/results-$PART.tar.gz
# at exit: the GPU machine sends back at most 8 files and 2 folder levels, so
# everything travels as one archive. Traces over 4 MiB and the stress
# example's traces are dropped (already checked there, too large to keep).
OUT=${OUT:?set OUT}
R=$OUT/results-$PART
D=$PWD/dist
mkdir -p "$R"
log() { echo "[$(date +%T)] $*" | tee -a "$R/log.txt"; }
pack() {
  find "$R" -name '*.trace' -size +4M -delete
  rm -rf "$R"/cuda-examples/stress/traces
  tar -czf "$OUT/results-$PART.tar.gz" -C "$OUT" "results-$PART"
}
trap pack EXIT
export GPULEAK_CACHE_DIR=/tmp/gpuleak-cache PYTHONUNBUFFERED=1
# NVLink multicast stays off in every environment these scripts start.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The CUDA examples (exact bytes, counts, lines) and the PyTorch corpus, with
# any traced process that crashed named in the log.
check_examples_and_corpus() {
  timeout 90 python3 tests/gpu/check_cuda_examples.py "$D/gpuleak" "$D/examples" examples/cuda "$R/cuda-examples" 2>&1 | tail -15 | tee -a "$R/log.txt"
  log "examples done"
  timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3 | tee -a "$R/log.txt"
  timeout 200 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R/torch-corpus" 2>&1 | tail -34 | tee -a "$R/log.txt"
  log "corpus done"
  grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" "$R"/torch-corpus/logs/*.log 2>/dev/null | tee -a "$R/log.txt"
}
log "start: $(nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader)"
