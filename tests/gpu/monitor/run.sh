#!/usr/bin/env bash
# The GPU checks of `gpuleak top` and `gpuleak doctor`, in one run (~1.5 min):
#   1. doctor names DataLoader workers that initialized CUDA, with their memory;
#   2. doctor names an orphaned child holding a CUDA context, with its memory;
#   3. top --json flags a process leaking 64 MiB/s within 30 s;
#   4. top at 1 Hz costs < 1% of one core (utime+stime over ~30 s).
# Writes two files (the device tool returns few): $OUT/monitor-gpu.json, the
# figures and pass/fail per check, and $OUT/monitor-gpu-raw.tar.gz, every raw
# output (doctor JSON and text, top JSON lines, nvidia-smi, script logs).
# Every process it starts is ended on exit.
#
# usage: tests/gpu/monitor/run.sh [OUT_DIR] [PATH_TO_GPULEAK]
#   OUT_DIR defaults to $OUT; PATH_TO_GPULEAK to ./build/gpuleak. The
#   binary's shared libraries must resolve (next to it; its rpath is $ORIGIN).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
# The scenario scripts; replaceable so the plumbing can be dry-run on a
# machine without a GPU (CPU stand-ins with a stand-in NVML).
SCENARIOS="${GPULEAK_MONITOR_SCENARIOS:-$HERE}"
RESULT_DIR="${1:-${OUT:?give OUT_DIR or set OUT}}"
GPULEAK="${2:-./build/gpuleak}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$RESULT_DIR"
WORK="$(mktemp -d /tmp/gpuleak-gpu-monitor.XXXXXX)"
OUT_DIR="$WORK/monitor-gpu-raw"  # raw outputs, packed into one archive at the end
mkdir -p "$OUT_DIR"
STARTED=()
STATUS=1

log() { echo "[monitor-gpu $(date +%T)] $*" >&2; }

FINISHED=0
# Scores what was gathered and packs it; also runs when the run is cut short
# (a timeout's SIGTERM), so partial results still come back.
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  "$PYTHON" "$HERE/evaluate.py" "$OUT_DIR" > "$RESULT_DIR/monitor-gpu.json"
  STATUS=$?
  cp "$RESULT_DIR/monitor-gpu.json" "$OUT_DIR/"
  tar -czf "$RESULT_DIR/monitor-gpu-raw.tar.gz" -C "$WORK" monitor-gpu-raw
  cat "$RESULT_DIR/monitor-gpu.json"
  log "wrote $RESULT_DIR/monitor-gpu.json and $RESULT_DIR/monitor-gpu-raw.tar.gz"
}

cleanup() {
  finish
  for pid in "${STARTED[@]}"; do
    # Each scenario leads its own process group (setsid), so its workers go too.
    kill -TERM -- "-$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null
  done
  sleep 1
  for pid in "${STARTED[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  done
  for pid in $(cat "$WORK"/*.pids 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log "stopped by a signal; scoring what there is"; exit 143' TERM INT

# Waits up to $2 seconds for file $1 to appear.
wait_for_file() {
  local deadline=$((SECONDS + $2))
  while [ ! -s "$1" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  [ -s "$1" ]
}

json_field() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

GPULEAK_BIN="$(cd "$(dirname "$GPULEAK")" && pwd)/$(basename "$GPULEAK")"
# A copied build keeps its libraries in lib/ beside the binary (the binary's
# rpath finds them); the path is repeated here for the libraries they need.
gpuleak() { LD_LIBRARY_PATH="$(dirname "$GPULEAK_BIN")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$GPULEAK_BIN" "$@"; }
GPULEAK=gpuleak
"$GPULEAK" --version > "$OUT_DIR/monitor-gpuleak-version.txt" 2>&1
if ldd "$GPULEAK_BIN" | grep -q "not found"; then
  log "gpuleak's shared libraries are missing here:"; ldd "$GPULEAK_BIN" | grep "not found" >&2
fi
ldd "$GPULEAK_BIN" > "$OUT_DIR/monitor-ldd.txt" 2>&1

log "baseline doctor"
"$GPULEAK" doctor --json > "$OUT_DIR/monitor-doctor-baseline.json" 2> "$OUT_DIR/monitor-doctor-baseline.err"
nvidia-smi > "$OUT_DIR/monitor-nvidia-smi-baseline.txt" 2>&1

# --- 1. DataLoader workers with their own CUDA context -----------------------
log "scenario 1: DataLoader workers that initialize CUDA"
setsid "$PYTHON" "$SCENARIOS/dataloader_cuda_workers.py" "$WORK/dataloader.json" 150 \
  > "$OUT_DIR/monitor-dataloader-script.log" 2>&1 &
DATALOADER_JOB=$!
STARTED+=("$DATALOADER_JOB")
if wait_for_file "$WORK/dataloader.json" 60; then
  json_field "$WORK/dataloader.json" "['workers']" | tr -d '[],' > "$WORK/dataloader.pids"
  sleep 2  # let the driver's process list settle
  "$GPULEAK" doctor --json > "$OUT_DIR/monitor-doctor-dataloader.json" 2> "$OUT_DIR/monitor-doctor-dataloader.err"
  "$GPULEAK" doctor > "$OUT_DIR/monitor-doctor-dataloader.txt" 2>&1
  nvidia-smi > "$OUT_DIR/monitor-nvidia-smi-dataloader.txt" 2>&1
  cp "$WORK/dataloader.json" "$OUT_DIR/monitor-dataloader-pids.json"
else
  log "the DataLoader scenario did not get ready (see monitor-dataloader-script.log)"
fi
kill -TERM -- "-$DATALOADER_JOB" 2>/dev/null; sleep 2; kill -KILL -- "-$DATALOADER_JOB" 2>/dev/null

# --- 2. an orphaned child holding a CUDA context -----------------------------
# setsid: the parent runs as its own session, as a job started from a
# terminal or a scheduler would; when it exits its child is re-parented.
log "scenario 2: an orphaned child holding a CUDA context"
setsid "$PYTHON" "$SCENARIOS/orphan_cuda_child.py" "$WORK/orphan.json" 150 \
  > "$OUT_DIR/monitor-orphan-script.log" 2>&1 &
ORPHAN_LAUNCHER=$!
if wait_for_file "$WORK/orphan.json" 45; then
  ORPHAN_PID="$(json_field "$WORK/orphan.json" "['orphan']")"
  echo "$ORPHAN_PID" > "$WORK/orphan.pids"
  wait "$ORPHAN_LAUNCHER" 2>/dev/null  # reap the parent: the child is now an orphan
  sleep 1
  "$GPULEAK" doctor --json > "$OUT_DIR/monitor-doctor-orphan.json" 2> "$OUT_DIR/monitor-doctor-orphan.err"
  "$GPULEAK" doctor > "$OUT_DIR/monitor-doctor-orphan.txt" 2>&1
  nvidia-smi > "$OUT_DIR/monitor-nvidia-smi-orphan.txt" 2>&1
  cp "$WORK/orphan.json" "$OUT_DIR/monitor-orphan-pids.json"
  kill -KILL "$ORPHAN_PID" 2>/dev/null
else
  log "the orphan scenario did not get ready (see monitor-orphan-script.log)"
fi

# --- 3 and 4. top flags a steady leak; top's own CPU cost at 1 Hz -------------
log "scenarios 3+4: top --json at 1 Hz against a process leaking 64 MiB/s (35 s)"
setsid "$PYTHON" "$SCENARIOS/leak_steady.py" "$WORK/leak.json" 60 \
  > "$OUT_DIR/monitor-leak-script.log" 2>&1 &
LEAK_JOB=$!
STARTED+=("$LEAK_JOB")
if wait_for_file "$WORK/leak.json" 45; then
  cp "$WORK/leak.json" "$OUT_DIR/monitor-leak-pid.json"
  LD_LIBRARY_PATH="$(dirname "$GPULEAK_BIN")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$GPULEAK_BIN" top --json --interval 1 > "$OUT_DIR/monitor-top-leak.jsonl" 2> "$OUT_DIR/monitor-top-leak.err" &
  TOP_PID=$!  # the binary itself, not a shell function, so its CPU time is its own
  STARTED+=("$TOP_PID")
  # CPU of top itself: utime+stime (fields 14, 15 of /proc/PID/stat) over ~30 s.
  sleep 2
  read -r T0 < <(awk '{print $14 + $15}' "/proc/$TOP_PID/stat")
  W0=$(date +%s.%N)
  sleep 30 & wait $!  # (wait, unlike sleep, lets a SIGTERM trap run at once)
  read -r T1 < <(awk '{print $14 + $15}' "/proc/$TOP_PID/stat")
  W1=$(date +%s.%N)
  kill -TERM "$TOP_PID"; wait "$TOP_PID" 2>/dev/null
  echo "{\"cpu_ticks_start\": $T0, \"cpu_ticks_end\": $T1, \"wall_start_s\": $W0, \"wall_end_s\": $W1, \"clock_ticks_per_s\": $(getconf CLK_TCK)}" \
    > "$OUT_DIR/monitor-top-cpu.json"
  "$GPULEAK" top --interval 1 --count 3 > "$OUT_DIR/monitor-top-text.txt" 2>&1
else
  log "the leak scenario did not get ready (see monitor-leak-script.log)"
fi
kill -TERM -- "-$LEAK_JOB" 2>/dev/null

finish
exit $STATUS
