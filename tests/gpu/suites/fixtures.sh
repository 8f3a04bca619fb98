# Records the H200 traces that CI tests read (examples/traces/), kept small:
# each program runs with fewer steps than its corpus run, so its trace stays
# far under the tree's 2 MiB limit. Traces land in $R/NAME/ with the
# report's JSON; the lead copies them into examples/traces/torch/NAME/.
#   control_varying_seq_len  a loop of one allocation inside Adam's
#       _multi_tensor_adam repeats in every optimizer step; the optimizer's
#       steps must stay the clock (tests/analysis/recorded_traces_test.cpp).
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2
record() {
  local name=$1; shift
  mkdir -p "$R/$name"
  timeout 120 "$D/gpuleak" run -q -o "$R/$name/traces" --json-report "$R/$name/report.json" -- "$@" \
    > "$R/$name/log.txt" 2>&1
  echo "$name: exit $? ; $(ls -l "$R/$name"/traces/*.trace 2>/dev/null | awk '{s+=$5} END {print s/1048576 " MiB of traces"}')"
  python3 - "$R/$name/report.json" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except Exception as error:
    print("  no report:", error); sys.exit(0)
for p in report.get("processes", []):
    g = p.get("growth") or {}
    print("  pid %s verdict %s step_source %s steps %s phases %s" % (
        p.get("pid"), g.get("verdict"), g.get("step_source"), g.get("steps"),
        [ph.get("name") for ph in g.get("phases") or []][:6]))
PY
}
record control_varying_seq_len python3 examples/torch/control_varying_seq_len.py --steps 200
