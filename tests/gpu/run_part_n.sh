#!/usr/bin/env bash
# GPU verification, part N: the CUDA examples on the last commit's bundle
# (its only change since part M orders the remembered-stack entry's stores
# for signal handlers). Results in $OUT/results-n.tar.gz.
set -u
PART=n
source "$(dirname "$0")/common.sh"
timeout 90 python3 tests/gpu/check_cuda_examples.py "$D/gpuleak" "$D/examples" examples/cuda "$R/cuda-examples" 2>&1 | tail -15 | tee -a "$R/log.txt"
log "examples done"
