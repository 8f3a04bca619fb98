#!/usr/bin/env bash
# GPU verification, part J: the async-pair overhead against processes without
# the collector, with enough processes (24 rounds) that each configuration's
# samples fall in both of the machine's states (the native pair runs at about
# 0.65 or 1.2 us, fixed per process), so that the script can compare like with
# like (async_ratio_by_state). Also 6 in-process runs. Run from the repository
# root with dist/ carried; results in $OUT/results-j.tar.gz.
set -u
PART=j
source "$(dirname "$0")/common.sh"
timeout 560 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/collector-overhead.json" 24 \
  --configs native,gpuleak,gpuleak_no_stack_reuse,cupti_empty_callbacks,compute_sanitizer \
  --in-process 6 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
