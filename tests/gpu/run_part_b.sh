#!/usr/bin/env bash
# GPU verification, part B (issues 3, 4 and 6 on one GPU, and a second look
# at the collector overhead after the hot-path changes): the labelled PyTorch
# corpus under gpuleak run, a 2-rank job on one GPU with gloo, the collector
# overhead broken into its parts, the monitor's GPU checks (doctor, top), and
# the launch-bound PyTorch loop with more rounds. Run from the repository root
# on the GPU machine with dist/ carried. Everything lands in $OUT/results-b.tar.gz.
set -u
PART=b
source "$(dirname "$0")/common.sh"
timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2 | tee -a "$R/log.txt"
timeout 230 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R/torch-corpus" 2>&1 | tail -40 | tee -a "$R/log.txt"
log "corpus done"
timeout 70 python3 tests/gpu/two_ranks/check_two_ranks.py "$D/gpuleak" gloo "$R/two-ranks-gloo" 2>&1 | tee -a "$R/log.txt"
log "two ranks (gloo, one GPU) done"
timeout 60 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" "$R/collector-overhead.json" 3 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
timeout 110 bash tests/gpu/monitor/run.sh "$R/monitor" "$D/gpuleak" 2>&1 | tail -12 | tee -a "$R/log.txt"
log "monitor done"
