#!/usr/bin/env bash
# GPU verification, part C: the PyTorch corpus and the 2-rank job again,
# after the GIL-free Python frame reader, the in-process holder walk and the
# exit/loader fixes. Also counts traced processes that crashed. Run from the
# repository root with dist/ carried; everything lands in $OUT/results-c.tar.gz.
set -u
PART=c
source "$(dirname "$0")/common.sh"
timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3 | tee -a "$R/log.txt"
timeout 240 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R/torch-corpus" 2>&1 | tail -34 | tee -a "$R/log.txt"
log "corpus done"
crashes=$(grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error" "$R"/torch-corpus/logs/*.log 2>/dev/null | wc -l)
log "corpus logs with a crash or internal error: $crashes"
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error" "$R"/torch-corpus/logs/*.log 2>/dev/null | tee -a "$R/log.txt"
timeout 80 python3 tests/gpu/two_ranks/check_two_ranks.py "$D/gpuleak" gloo "$R/two-ranks-gloo" 2>&1 | tee -a "$R/log.txt"
log "two ranks (gloo, one GPU) done"
