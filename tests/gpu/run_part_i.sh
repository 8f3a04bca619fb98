#!/usr/bin/env bash
# GPU verification, part I (fourth session): the async-pair overhead with
# remembered stacks (a stack unwound at one place is reused while its return
# addresses are still in their slots), twice against native, the collector
# without reuse and compute-sanitizer in one run and inside 12 processes;
# then the CUDA examples (exact bytes, counts and lines, the 8-thread stress)
# and the PyTorch corpus, whose stacks now come through the reuse path. Run
# from the repository root with dist/ carried; results in $OUT/results-i.tar.gz.
set -u
PART=i
source "$(dirname "$0")/common.sh"
for run in 1 2; do
  timeout 200 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
    "$R/collector-overhead-$run.json" 3 \
    --configs native,gpuleak,gpuleak_no_stack_reuse,cupti_empty_callbacks,gpuleak_no_native_stacks,compute_sanitizer \
    --in-process 12 2>&1 | tee -a "$R/log.txt"
  log "collector overhead run $run done"
done
check_examples_and_corpus
