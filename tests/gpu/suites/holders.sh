# The holder-kind corpus (examples/torch/holders/holders.json): per case, the
# holder named (type, name, owner), the keeping statement's line within 1,
# the top growing site a frame of the script (tests/gpu/holder_corpus.py).
# Then the engine-thread case once more, short, keeping its trace in
# $R/trace/ to be committed as examples/traces/torch/holder_tensor_hook_gradients/.
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2
timeout 170 python3 tests/gpu/holder_corpus.py --gpuleak "$D/gpuleak" --out "$R" --jobs 6 --timeout 100 2>&1 | tail -24
mkdir -p "$R/trace"
timeout 45 "$D/gpuleak" run -o "$R/trace" -- python3 examples/torch/holders/holder_tensor_hook_gradients.py --steps 40 > "$R/trace/run.txt" 2>&1
ls -la "$R/trace" | tail -4
python3 - "$R" <<'PY'
import json, os, sys
R = sys.argv[1]
summary = {"suite": "holders", "about": "holder-kind corpus under gpuleak run; details in holder-corpus.json",
           "trace_to_commit": "trace/gpuleak-*.trace -> examples/traces/torch/holder_tensor_hook_gradients/ "
           "(read by tests/analysis/backward_sites_test.cpp)"}
try:
    totals = json.load(open(os.path.join(R, "holder-corpus.json")))["totals"]
    summary.update(totals)
    summary["ok"] = totals["passed"] == totals["cases"]
except Exception as error:
    summary.update({"ok": False, "error": "no holder-corpus.json (%s)" % error})
summary["trace_files"] = sorted(f for f in os.listdir(os.path.join(R, "trace")) if f.endswith(".trace"))
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=2)
print(json.dumps({k: summary[k] for k in ("ok", "trace_files") if k in summary}))
PY
# Exit status 1 when a log shows a crash (and names it), 0 otherwise.
! grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" "$R"/logs/*.log 2>/dev/null
