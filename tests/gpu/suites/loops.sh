# The loop corpus (examples/loops/corpus.json, issue 12): loops that do not
# step a torch.optim optimizer -- evaluation, inference, serving, custom
# optimizers, JAX, CuPy, CUDA C++. Sourced by tests/gpu/verify.sh with $D (the
# bundle) and $R (this suite's results folder); run it as
#
#     bash tests/gpu/verify.sh loops:240
#
# 1. builds the .cu programs with nvcc into $R/bin (removed at the end);
# 2. --plain: every program runs alone and exits 0 (and how long it takes);
# 3. scored: every case under `gpuleak run` (tests/gpu/loops_corpus.py):
#    verdict, step source, steps, iterations to verdict, top site; a gated leak
#    passes with LEAK within 50 iterations after warm-up, a control with no LEAK;
# 4. keeps each case's traces of at most 1 MiB (the lead takes CI fixtures from
#    them), drops larger ones and names them in summary.json;
# 5. writes $R/summary.json: both runs' totals, one line per case, the commands.
loops_bin=$R/bin
mkdir -p "$loops_bin"
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
log "loops: $nvcc_path"
for source in examples/loops/*.cu; do
  name=$(basename "$source" .cu)
  timeout 120 "$nvcc_path" -g -O1 -std=c++17 -arch=sm_90 -o "$loops_bin/$name" "$source" -lcuda \
    > "$R/nvcc-$name.log" 2>&1 &
done
wait
ls "$loops_bin"
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3
log "loops: plain"
timeout 50 python3 tests/gpu/loops_corpus.py --plain --cuda-bin "$loops_bin" --out "$R/plain" \
  --jobs 8 --timeout 45 2>/dev/null | tail -32
log "loops: under gpuleak"
timeout 160 python3 tests/gpu/loops_corpus.py --gpuleak "$D/gpuleak" --cuda-bin "$loops_bin" \
  --out "$R/scored" --jobs 8 --timeout 100 2>/dev/null | tail -34
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" \
  "$R"/scored/logs/*.log 2>/dev/null > "$R/crashed-logs.txt"
find "$R/scored" -name '*.trace' -size +1M -printf '%P %s\n' > "$R/dropped-traces.txt"
find "$R/scored" -name '*.trace' -size +1M -delete
rm -rf "$loops_bin"
timeout 30 python3 - "$R" "$(cat "$D/COMMIT" 2>/dev/null || echo unknown)" <<'EOF'
import json, os, sys
results, commit = sys.argv[1], sys.argv[2]

def load(name):
    try:
        with open(os.path.join(results, name, "loops-corpus.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        return {"error": str(error)}

def lines(name):
    try:
        with open(os.path.join(results, name)) as handle:
            return [line.strip() for line in handle if line.strip()]
    except OSError:
        return []

plain, scored = load("plain"), load("scored")
kept = sorted(os.path.relpath(os.path.join(folder, f), results)
              for folder, _, files in os.walk(os.path.join(results, "scored")) for f in files if f.endswith(".trace"))
rows = []
for case in scored.get("cases", []):
    got = case.get("got") or {}
    rows.append({"case": case["case"], "kind": case["kind"], "gate": case["gate"], "pass": case["pass"],
                 "expected": case["expected"]["verdict"], "verdict": got.get("verdict"),
                 "verdict_matches": case.get("verdict_matches"),
                 "step_source": got.get("step_source"), "steps": got.get("steps"),
                 "iterations": case["iterations"], "iterations_to_verdict": got.get("iterations_to_verdict"),
                 "site_match": got.get("site_match"), "wall_s": case["wall_s"], "error": case.get("error")})
summary = {
    "suite": "loops",
    "checks": "issue 12: every gated leak of examples/loops gets LEAK within 50 iterations after warm-up, "
              "no control gets LEAK; plain: every program runs alone and exits 0",
    "bundle_commit": commit,
    "plain": plain.get("totals", plain),
    "scored": scored.get("totals", scored),
    "all_gated_pass": bool(scored.get("totals") and not scored["totals"].get("failed")
                           and scored["totals"].get("gated_cases")),
    "cases": rows,
    "commands": {"plain": plain.get("command"), "scored": scored.get("command")},
    "crashed_logs": lines("crashed-logs.txt"),
    "traces_kept": kept,
    "traces_dropped_over_1MiB": lines("dropped-traces.txt"),
}
with open(os.path.join(results, "summary.json"), "w") as handle:
    json.dump(summary, handle, indent=2)
    handle.write("\n")
print("loops: %s gated cases pass of %s; plain %s of %s ran; %d traces kept" % (
    summary["scored"].get("passed"), summary["scored"].get("gated_cases"),
    summary["plain"].get("passed"), summary["plain"].get("gated_cases"), len(kept)))
EOF
