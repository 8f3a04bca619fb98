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
timeout 90 python3 tests/gpu/check_cuda_examples.py "$D/gpuleak" "$D/examples" examples/cuda "$R/cuda-examples" 2>&1 | tail -15 | tee -a "$R/log.txt"
log "examples done"
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3 | tee -a "$R/log.txt"
timeout 200 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R/torch-corpus" 2>&1 | tail -34 | tee -a "$R/log.txt"
log "corpus done"
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" "$R"/torch-corpus/logs/*.log 2>/dev/null | tee -a "$R/log.txt"
