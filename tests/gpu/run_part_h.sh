#!/usr/bin/env bash
# GPU verification, part H: the async-pair overhead of the collector's
# final hot path (lock-free thread buffers, events encoded by the writer,
# entry callbacks that return at once), against native and compute-sanitizer
# in one run, and inside 12 processes of 35 short rounds each. Run from the
# repository root with dist/ carried; results in $OUT/results-h.tar.gz.
set -u
PART=h
source "$(dirname "$0")/common.sh"
timeout 280 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/collector-overhead.json" 3 \
  --configs native,gpuleak,cupti_empty_callbacks,gpuleak_no_native_stacks,compute_sanitizer \
  --in-process 12 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
