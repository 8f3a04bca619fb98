# The stream-ordered allocation pair under `gpuleak run` (issue 32): bench/cuda/alloc_pairs
# natively, under gpuleak (the default: preloaded interposer, native stacks), under gpuleak
# with GPULEAK_NATIVE_DEPTH=0, and under compute-sanitizer --leak-check full, each a fresh
# process, 8 interleaved rounds for 1, 8 and 48 call sites (bench/run_async_pair_overhead.py);
# with them the A/A control (native again: the benchmark's own spread), the in-process
# comparison (wrappers only / empty hooks / recording in one process) and, at 8 sites, the
# breakdown (GPULEAK_BENCH_SKIP=PART, one part of the per-event work left out at a time), across
# processes and in one process (where the machine's per-process state cancels out).
# $R/async-pairs.json has every sample; summary.json the medians, round ratios and their
# inter-quartile range per number of sites, and pass (gpuleak's async pair: median round
# ratio <= 1.2, IQR <= 0.15, at every number of sites, 8 rounds done). About 4-5 minutes:
# run as async-pairs:360 (ASYNC_PAIRS_SECONDS, default 300, stops starting rounds).
timeout 340 python3 bench/run_async_pair_overhead.py "$D/bench/alloc_pairs" "$D/gpuleak" \
  "$R/async-pairs.json" --rounds "${ASYNC_PAIRS_ROUNDS:-8}" --sites 1,8,48 --breakdown-sites 8 \
  --seconds "${ASYNC_PAIRS_SECONDS:-300}" 2>&1 | tail -16
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
try:
    result = json.load(open(r + "/async-pairs.json"))
except Exception as error:
    json.dump({"pass": False, "error": str(error)}, open(r + "/summary.json", "w"))
    sys.exit(0)
summary = {
    "what": result["what"],
    "capture_backend": result["capture_backend"],
    "rounds_done": result["rounds_done"],
    "target": result["target"],
    "by_sites": {sites: {name: value for name, value in row.items()} for sites, row in result["figures"].items()},
    "errors": result["errors"],
    "pass": bool(result["meets_target"]) and not result["errors"],
}
json.dump(summary, open(r + "/summary.json", "w"), indent=1)
print("pass:", summary["pass"])
PY
