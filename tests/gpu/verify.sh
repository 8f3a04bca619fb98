#!/usr/bin/env bash
# GPU verification: runs named suites on the GPU machine over the bundle in
# dist/ (tools/make_device_bundle.sh), through the device tool with dist/
# carried:
#
#     bash tests/gpu/verify.sh SUITE[:SECONDS]...
#
# Each suite is tests/gpu/suites/SUITE.sh, sourced in a subshell with
#   D    the bundle (dist/: gpuleak, lib/, python/, examples/, bench/)
#   R    its results folder, $OUT/results/SUITE (write summary.json there)
#   log  a timestamped line into $OUT/results/log.txt and stdout
# and killed at SECONDS (default 120). Everything under $OUT/results travels
# back as one archive, results.tar.gz (the device tool returns at most 8
# files, two folders deep); traces over 4 MiB are dropped first.
# Progress is in $OUT/results/log.txt even when the call is cut short.
set -u
OUT=${OUT:?set OUT}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export D=$ROOT/dist
RESULTS=$OUT/results
mkdir -p "$RESULTS"
log() { echo "[$(date +%T)] $*" | tee -a "$RESULTS/log.txt"; }
export -f log
export RESULTS
pack() {
  find "$RESULTS" -name '*.trace' -size +4M -delete
  tar -czf "$OUT/results.tar.gz" -C "$OUT" results
  cp "$RESULTS/log.txt" "$OUT/log.txt" 2>/dev/null
}
trap pack EXIT
export GPULEAK_CACHE_DIR=/tmp/gpuleak-cache PYTHONUNBUFFERED=1
# NVLink multicast stays off in every environment these suites start.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The bundle's CUDA programs, when it was made without nvcc.
bash tests/gpu/build_cuda_programs.sh "$D" 2>&1 | tee -a "$RESULTS/log.txt"
log "start: commit $(cat "$D/COMMIT" 2>/dev/null || echo unknown); $(nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader 2>&1 | head -1)"
# VERIFY_PARALLEL=1 starts every suite at once and waits for all (for suites
# that measure no time: the machine's 16 cores and one GPU are shared); by
# default they run one after another.
run_suite() {
  local spec=$1 suite seconds script start rc
  suite=${spec%%:*}
  seconds=120
  [ "$spec" != "$suite" ] && seconds=${spec#*:}
  script=tests/gpu/suites/$suite.sh
  if [ ! -f "$script" ]; then log "no suite $suite"; return; fi
  export R=$RESULTS/$suite
  mkdir -p "$R"
  log "suite $suite (limit ${seconds}s)"
  start=$(date +%s)
  timeout --kill-after=5 "$seconds" bash -c "set -u; source '$script'" > "$R/stdout.txt" 2>&1
  rc=$?
  log "suite $suite: exit $rc after $(( $(date +%s) - start ))s"
  [ "${VERIFY_PARALLEL:-0}" = 1 ] || tail -25 "$R/stdout.txt"
}
for spec in "$@"; do
  if [ "${VERIFY_PARALLEL:-0}" = 1 ]; then run_suite "$spec" & else run_suite "$spec"; fi
done
wait
if [ "${VERIFY_PARALLEL:-0}" = 1 ]; then
  for spec in "$@"; do
    echo "== ${spec%%:*}"; tail -8 "$RESULTS/${spec%%:*}/stdout.txt" 2>/dev/null
  done
fi
