# Records the PyTorch traces the demo and the README show (examples/traces/torch/
# {leak_eval_total_loss,leak_small_tensor_per_step,control_replay_buffer}) with this
# bundle's gpuleak, as `gpuleak run` records them for a user; copy $R/traces/* over
# examples/traces/torch/ to ship them. Run as demo-traces:200.
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -1
mkdir -p "$R/traces"
record() {
  local name=$1; shift
  timeout 100 "$D/gpuleak" run -o "$R/traces/$name" -- python3 "examples/torch/$name.py" "$@" \
    > "$R/$name.txt" 2>&1
  echo "exit $?" >> "$R/$name.txt"
  log "$name: $(grep -m1 -o 'Verdict: [A-Z ]*' "$R/$name.txt")"
}
record leak_eval_total_loss --steps 120
record leak_small_tensor_per_step --steps 120
record control_replay_buffer --steps 500
python3 - "$R" <<'PY'
import json, os, re, sys
R = sys.argv[1]
got = {}
for name in ("leak_eval_total_loss", "leak_small_tensor_per_step", "control_replay_buffer"):
    m = re.search(r"Verdict: (LEAK|NO LEAK|NOT YET|INCOMPLETE)", open(os.path.join(R, name + ".txt")).read())
    got[name] = m.group(1) if m else None
summary = {"suite": "demo-traces", "verdicts": got,
           "pass": got == {"leak_eval_total_loss": "LEAK", "leak_small_tensor_per_step": "LEAK",
                           "control_replay_buffer": "NO LEAK"}}
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=1)
print(json.dumps(summary))
PY
# One archive, so that no trace is dropped by verify.sh's size cut on the way back.
tar -czf "$R/traces.tar.gz" -C "$R" traces && rm -rf "$R/traces"
