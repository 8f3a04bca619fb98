# PyTorch step time under gpuleak run against native and PyTorch's own memory
# history (bench/torch/run_overhead.py), a GPU-bound transformer and a
# launch-bound MLP, ROUNDS interleaved rounds (default 4). Writes
# $R/torch-overhead.json (the baseline bench/baselines/gpu/torch-overhead-0e7badc.json
# came from this command). Needs about 300 s with 4 rounds: run as torch-overhead:330.
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3
timeout 260 python3 bench/torch/run_overhead.py "$D/gpuleak" "$R/torch-overhead.json" "${ROUNDS:-4}" \
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
