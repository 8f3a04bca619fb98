#!/usr/bin/env bash
# GPU verification, part A (issue 2 and issue 3's overhead): the CUDA
# examples against their markers, the collector overhead against native and
# compute-sanitizer, and PyTorch step-time overhead. Run from the repository
# root on the GPU machine with dist/ carried (tools/make_device_bundle.sh).
# Everything lands in one archive, $OUT/results-a.tar.gz (at most 8 files
# come back from the GPU machine).
set -u
PART=a
source "$(dirname "$0")/common.sh"
timeout 180 python3 tests/gpu/check_cuda_examples.py "$D/gpuleak" "$D/examples" examples/cuda "$R/cuda-examples" 2>&1 | tee -a "$R/log.txt"
log "examples done"
timeout 200 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" "$R/collector-overhead.json" 3 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3 | tee -a "$R/log.txt"
log "hook built"
timeout 330 python3 bench/torch/run_overhead.py "$D/gpuleak" "$R/torch-overhead.json" 2 2>&1 | tee -a "$R/log.txt"
log "torch overhead done"
