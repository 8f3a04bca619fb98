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
log "start: $(nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader)"
