#!/usr/bin/env bash
# GPU verification, part M: the final commit's bundle -- the overhead as in
# part J (24 rounds, like for like by machine state, 6 in-process runs), then
# the CUDA examples and the PyTorch corpus. Results in $OUT/results-m.tar.gz.
set -u
PART=m
source "$(dirname "$0")/common.sh"
timeout 300 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/collector-overhead.json" 24 \
  --configs native,gpuleak,gpuleak_no_stack_reuse,cupti_empty_callbacks,compute_sanitizer \
  --in-process 6 > "$R/overhead-stdout.txt" 2>&1
log "collector overhead done"
check_examples_and_corpus
