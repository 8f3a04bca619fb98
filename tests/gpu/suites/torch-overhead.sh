# PyTorch step time under gpuleak run against native and PyTorch's own memory
# history (bench/torch/run_overhead.py), a GPU-bound transformer and a
# launch-bound MLP, ROUNDS interleaved rounds (default 4). Writes
# $R/torch-overhead.json (the baseline bench/baselines/gpu/torch-overhead.json
# came from this command). A round takes about 87 s on the H200, 4 rounds 350 s (OVERHEAD_SECONDS, default
# 360, cuts the benchmark; it keeps the rounds it finished): run as torch-overhead:380.
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3
timeout "${OVERHEAD_SECONDS:-360}" python3 bench/torch/run_overhead.py "$D/gpuleak" "$R/torch-overhead.json" "${ROUNDS:-4}" \
  --models mlp,transformer --configs native,history,gpuleak_hook 2>&1 | tail -12
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
try:
    result = json.load(open(r + "/torch-overhead.json"))
    met = result.get("targets_met")
    met_all = all(met.values()) if isinstance(met, dict) else bool(met)
    summary = {"ratio_to_native": result.get("ratio_to_native"), "targets_met": met,
               "pass": met_all and not result.get("errors")}
except Exception as error:
    summary = {"pass": False, "error": str(error)}
json.dump(summary, open(r + "/summary.json", "w"), indent=1)
print(json.dumps(summary))
PY
