# Exports and diff on real traces: the leaking and the fixed evaluation loop
# of examples/diff/eval_loss.py (traces kept in $R/{leak,fixed,fixed2}/ to be
# committed as examples/traces/diff/), `gpuleak diff` on leak->fixed and on
# two fixed runs, and every export of the leaking run opened by its
# consumer here (torch 2.11's memory_viz functions for the pickle).
for run in leak fixed fixed2; do
  mkdir -p "$R/$run"
  flag=""; [ "$run" != leak ] && flag=--fixed
  timeout 60 "$D/gpuleak" run -o "$R/$run" -- python3 examples/diff/eval_loss.py --steps 80 $flag > "$R/$run/run.txt" 2>&1
  log "run $run: exit $?"
done
timeout 60 "$D/gpuleak" diff "$R/leak" "$R/fixed" > "$R/diff-leak-fixed.txt" 2>&1; echo "exit $?" >> "$R/diff-leak-fixed.txt"
timeout 60 "$D/gpuleak" diff --json "$R/leak" "$R/fixed" > "$R/diff-leak-fixed.json" 2> "$R/diff-leak-fixed.err"
timeout 60 "$D/gpuleak" diff --fail-on-new-growth "$R/fixed" "$R/fixed2" > "$R/diff-fixed-fixed.txt" 2>&1; echo "exit $?" >> "$R/diff-fixed-fixed.txt"
timeout 60 "$D/gpuleak" diff --fail-on-new-growth "$R/fixed" "$R/leak" > "$R/diff-fixed-leak.txt" 2>&1; echo "exit $?" >> "$R/diff-fixed-leak.txt"
cat "$R"/diff-*.txt
for f in memory_viz:pickle perfetto:json speedscope:json folded:txt pprof:pb.gz csv:csv; do
  timeout 60 "$D/gpuleak" report "$R/leak" --format "${f%%:*}" -o "$R/leak.${f%%:*}.${f#*:}" > /dev/null 2>> "$R/exports.err"
  log "export ${f%%:*}: exit $? $(stat -c %s "$R/leak.${f%%:*}.${f#*:}" 2>/dev/null) bytes"
done
timeout 120 python3 tests/report/exports/check_memory_viz.py "$R/leak.memory_viz.pickle" --expect-frame eval_loss.py > "$R/check-memory-viz.txt" 2>&1
echo "exit $?" >> "$R/check-memory-viz.txt"
cat "$R/check-memory-viz.txt" | tail -15
python3 - "$R" <<'PY'
import json, os, sys
R = sys.argv[1]
def tail(name):
    try:
        return open(os.path.join(R, name)).read()
    except OSError as e:
        return "missing (%s)" % e
summary = {"suite": "exports",
           "diff_leak_fixed": tail("diff-leak-fixed.txt"),
           "diff_fixed_fixed": tail("diff-fixed-fixed.txt"),
           "diff_fixed_leak": tail("diff-fixed-leak.txt"),
           "check_memory_viz": tail("check-memory-viz.txt"),
           "export_errors": tail("exports.err")}
try:
    summary["diff_leak_fixed_json"] = json.load(open(os.path.join(R, "diff-leak-fixed.json")))
except Exception as e:
    summary["diff_leak_fixed_json"] = "unreadable (%s)" % e
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=2)
PY
