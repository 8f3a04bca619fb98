#!/usr/bin/env bash
# GPU verification, part E: the async-pair overhead on pinned cores (part D
# showed the native pair alternating between 0.68 and 1.15 us from process to
# process), the PyTorch corpus after the carried-state holder change, and the
# launch-bound step time against PyTorch's memory history, unpinned, more
# rounds. Run from the repository root with dist/ carried; everything lands
# in $OUT/results-e.tar.gz.
set -u
PART=e
source "$(dirname "$0")/common.sh"
# Two cores next to the GPU (its PCI device's local CPU list).
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f')
local_cpus=$(cat "/sys/bus/pci/devices/${bus#0000}/local_cpulist" 2>/dev/null || echo "0-15")
first=$(echo "$local_cpus" | cut -d, -f1 | cut -d- -f1)
CPUS="$((first + 2))-$((first + 3))"
log "GPU $bus, local CPUs $local_cpus, pinned to $CPUS; $(lscpu | grep -E 'Model name|NUMA node\(s\)' | tr -s ' ' | tr '\n' ';')"

timeout 170 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/collector-overhead-pinned.json" 9 --cpus "$CPUS" \
  --configs native,gpuleak,cupti_empty_callbacks,gpuleak_no_native_stacks,compute_sanitizer 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3 | tee -a "$R/log.txt"
timeout 200 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R/torch-corpus" 2>&1 | tail -34 | tee -a "$R/log.txt"
log "corpus done"
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" "$R"/torch-corpus/logs/*.log 2>/dev/null | tee -a "$R/log.txt"
timeout 190 python3 bench/torch/run_overhead.py "$D/gpuleak" "$R/torch-overhead-mlp.json" 5 --models mlp \
  --configs native,history,gpuleak_hook 2>&1 | tail -2 | tee -a "$R/log.txt"
log "torch overhead done"
