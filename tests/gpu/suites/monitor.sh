# The monitor on the GPU (tests/gpu/monitor/run.sh): doctor names DataLoader
# workers with their own CUDA context and an orphaned child holding one, top
# --json flags a leaking process, top at 1 Hz costs little CPU. Writes
# $R/monitor-gpu.json (the baseline bench/baselines/gpu/monitor-gpu.json
# came from this) and summary.json. Needs about 100 s: run as monitor:120.
timeout 110 bash tests/gpu/monitor/run.sh "$R" "$D/gpuleak" 2>&1 | tail -12
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
try:
    result = json.load(open(r + "/monitor-gpu.json"))
    summary = {"pass": bool(result.get("all_pass")),
               "checks": {name: check.get("pass") for name, check in result.get("checks", {}).items()}}
except Exception as error:
    summary = {"pass": False, "error": str(error)}
json.dump(summary, open(r + "/summary.json", "w"), indent=1)
print(json.dumps(summary))
PY
