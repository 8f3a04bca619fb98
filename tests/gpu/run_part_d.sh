#!/usr/bin/env bash
# GPU verification, part D (issues 2 and 3 after the first session): why one
# PyTorch program aborted under the collector, the clock the collector picks
# and the async-pair overhead with it, the CUDA examples again, the PyTorch
# corpus again (forked holder walk, carried-state holders), and the
# launch-bound step time against PyTorch's memory history with more rounds
# on pinned cores. Run from the repository root with dist/ carried
# (tools/make_device_bundle.sh); everything lands in $OUT/results-d.tar.gz.
set -u
PART=d
source "$(dirname "$0")/common.sh"
{
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
  echo "available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource)"
  echo "cpus: $(nproc); tools: $(command -v perf gdb cc | tr '\n' ' ')"
  python3 - <<'PY'
import time
def per_call(clock, n=200000):
    best = None
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            time.clock_gettime_ns(clock)
        t = (time.perf_counter_ns() - t0) / n
        best = t if best is None else min(best, t)
    return best
base = per_call(time.CLOCK_MONOTONIC_COARSE)
print("python loop + clock_gettime_ns: MONOTONIC %.0f ns, MONOTONIC_COARSE %.0f ns" %
      (per_call(time.CLOCK_MONOTONIC), base))
PY
  GPULEAK_TRACE_DIR=/tmp/clock-trace CUDA_INJECTION64_PATH="$D/lib/libgpuleak_collector.so" \
    "$D/bench/alloc_pairs" 1 1000 10 > /dev/null
  echo "collector's clock annotation: $("$D/gpuleak" report --json /tmp/clock-trace | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["clock"])')"
} > "$R/clock-probe.txt" 2>&1
cat "$R/clock-probe.txt" | tee -a "$R/log.txt"

timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3 | tee -a "$R/log.txt"
timeout 180 env OUT="$R" bash tests/gpu/diagnose_abort.sh 2>&1 | tee -a "$R/log.txt"
log "abort diagnosis done"
timeout 150 python3 bench/run_collector_overhead.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" "$R/collector-overhead.json" 5 2>&1 | tee -a "$R/log.txt"
log "collector overhead done"
timeout 120 python3 tests/gpu/check_cuda_examples.py "$D/gpuleak" "$D/examples" examples/cuda "$R/cuda-examples" 2>&1 | tail -15 | tee -a "$R/log.txt"
log "examples done"
timeout 200 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R/torch-corpus" 2>&1 | tail -34 | tee -a "$R/log.txt"
log "corpus done"
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" "$R"/torch-corpus/logs/*.log 2>/dev/null | tee -a "$R/log.txt"
timeout 200 python3 bench/torch/run_overhead.py "$D/gpuleak" "$R/torch-overhead-mlp.json" 4 --models mlp \
  --configs native,history,gpuleak_hook --cpus 4-7 2>&1 | tail -3 | tee -a "$R/log.txt"
log "torch overhead done"
