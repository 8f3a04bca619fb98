#!/usr/bin/env bash
# GPU verification, part G (third session): the async-pair overhead after the
# collector's hot path was trimmed (unwinding in the CUPTI callback, a
# four-lane stack hash, trace buffers pre-faulted by the writer, the TSC as
# clock), measured in one run against native and compute-sanitizer and
# inside one process; then the CUDA examples and the PyTorch corpus again,
# for the changes since they last ran on a GPU (inline frames, plumbing
# folding, "live at exit" wording, CUDA array sizes). Run from the repository
# root with dist/ carried; everything lands in $OUT/results-g.tar.gz.
set -u
PART=g
source "$(dirname "$0")/common.sh"
{
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
  echo "tsc flags: $(grep -o -w 'constant_tsc\|nonstop_tsc' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  GPULEAK_TRACE_DIR=/tmp/clock-trace CUDA_INJECTION64_PATH="$D/lib/libgpuleak_collector.so" \
    "$D/bench/alloc_pairs" 1 1000 10 > /dev/null
  echo "collector's clock annotation: $("$D/gpuleak" report --json /tmp/clock-trace | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["clock"])')"
} > "$R/clock-probe.txt" 2>&1
cat "$R/clock-probe.txt" | tee -a "$R/log.txt"

timeout 200 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/collector-overhead.json" 3 \
  --configs native,gpuleak,cupti_empty_callbacks,gpuleak_no_native_stacks,compute_sanitizer \
  --in-process 4 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
check_examples_and_corpus
