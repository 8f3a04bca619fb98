#!/usr/bin/env bash
# GPU verification, part H: the async-pair overhead again after part G, with
# the entry callbacks of allocations returning before touching the
# collector's state, hot functions grouped, no PLT; twice as many processes
# in-process (12 processes x 35 short rounds) so the median is steadier. Run from the
# repository root with dist/ carried; results in $OUT/results-h.tar.gz.
set -u
PART=h
source "$(dirname "$0")/common.sh"
timeout 280 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/collector-overhead.json" 3 \
  --configs native,gpuleak,cupti_empty_callbacks,gpuleak_no_native_stacks,compute_sanitizer \
  --in-process 12 2>--in-process 8 2>&11 | tee -a "$R/log.txt"
log "collector overhead done"
