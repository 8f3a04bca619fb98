#!/usr/bin/env bash
# GPU verification, part K: does loading the collector change how often a
# process lands in the machine's slow state? 60 short processes each of
# native, gpuleak, and the collector loaded with empty callbacks, taking
# turns (bench/run_state_census.py). Results in $OUT/results-k.tar.gz.
set -u
PART=k
source "$(dirname "$0")/common.sh"
cd bench && timeout 500 python3 run_state_census.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/state-census.json" 60 2>&1 | tee -a "$R/log.txt"
log "census done"
