# The process corpus (examples/processes/corpus.json, issue 13): every case
# under gpuleak run, all at once; roles, process findings (none on controls),
# the CUDA-init line, device memory within 10 % of nvidia-smi's per-process
# figure; what a CUDA context costs; what gpuleak doctor saw of DataLoader
# workers (tests/gpu/process_corpus.py). Sourced by tests/gpu/verify.sh with
# $D (the bundle) and $R (this suite's results folder); run it as
#
#     bash tests/gpu/verify.sh processes:200
#
# Writes $R/summary.json (what it checks, the bundle's commit, totals, one row
# per case with its failed checks and why) from $R/process-corpus.json (every
# case in full); keeps the traces of three small cases in $R/<case>/traces
# (with $R/<case>/truth.json) for the CI test of the analysis
# (tests/analysis/recorded_process_traces_test.cpp), traces over 2 MiB dropped
# and named in summary.json. Time: hook build <= 60 s, cases <= 110 s (each
# killed at 85 s; all at once they take about as long as the slowest, the
# orphan case's 25 s child), summary <= 30 s: inside the 200 s it is given. Cut
# short, process_corpus.py ends its cases' processes and keeps what finished.
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2
log "processes: under gpuleak run"
timeout 110 python3 tests/gpu/process_corpus.py --gpuleak "$D/gpuleak" --out "$R" --timeout 85 \
  --jobs 12 2>"$R/progress.txt" | tail -20
find "$R" -name '*.trace' -size +2M -printf '%P %s\n' > "$R/dropped-traces.txt"
find "$R" -name '*.trace' -size +2M -delete
timeout 30 python3 - "$R" "$(cat "$D/COMMIT" 2>/dev/null || echo unknown)" <<'EOF'
import json, os, sys
results, commit = sys.argv[1], sys.argv[2]
try:
    with open(os.path.join(results, "process-corpus.json")) as handle:
        run = json.load(handle)
except (OSError, ValueError) as error:
    run = {"error": "no process-corpus.json: %s" % error}

def lines(name):
    try:
        with open(os.path.join(results, name)) as handle:
            return [line.strip() for line in handle if line.strip()]
    except OSError:
        return []

rows = []
for case in run.get("cases", []):
    failed = {check: case.get("why", {}).get(check, ["failed"])
              for check, ok in case.get("checks", {}).items() if ok is False}
    rows.append({"case": case["case"], "kind": case["kind"], "pass": case["pass"],
                 "exit_status": case.get("exit_status"), "expected_exit_status": case["expected"]["exit_status"],
                 "checks": case.get("checks"), "failed": failed, "error": case.get("error"),
                 "findings_reported": [f.get("kind") for f in case.get("reported_findings", [])],
                 "findings_expected": [f["kind"] for f in case["expected"]["findings"]],
                 "device_memory": case.get("device_memory"), "doctor": (case.get("doctor") or {}).get(
                     "truth_pids_listed") if case.get("doctor") else None,
                 "wall_s": case.get("wall_s")})
kept = sorted(os.path.relpath(os.path.join(folder, f), results)
              for folder, _, files in os.walk(results) for f in files if f.endswith(".trace"))
totals = run.get("totals", {})
summary = {
    "suite": "processes",
    "checks": "issue 13: each case of examples/processes/corpus.json under `gpuleak run`, scored against "
              "its labels and the pids its script wrote (truth.json). Per case: exit_status; roles (every "
              "truth pid has the labelled role in job.processes); findings (the kinds equal the labelled "
              "kinds, each naming exactly the truth pids; controls and the error case: no finding at all); "
              "cuda_init (cuda_first_use.site is a `# CUDA-INIT` line, in the labelled function); "
              "summary_line_only (gpu_work false, no text section); context_memory (report's peak within "
              "10 % of nvidia-smi's peak for the pid). null = the label is empty. A case passes when all "
              "its checks pass. context_size: median nvidia-smi peak of the worker_context cases' "
              "DataLoader workers; context_cost: a lone context (driver only, torch first tensor, after "
              "a matmul); doctor: which truth pids `gpuleak doctor --json` (every 3 s) listed in the "
              "dataloader_* cases.",
    "bundle_commit": commit,
    "complete": run.get("complete", False),
    "all_pass": bool(totals.get("cases")) and totals.get("passed") == totals.get("cases")
                and not totals.get("not_finished"),
    "totals": totals,
    "cases": rows,
    "command": run.get("command"),
    "error": run.get("error"),
    "traces_kept": kept,
    "traces_dropped_over_2MiB": lines("dropped-traces.txt"),
    "progress": lines("progress.txt")[-15:],
}
with open(os.path.join(results, "summary.json"), "w") as handle:
    json.dump(summary, handle, indent=2)
    handle.write("\n")
print("processes: %s of %s cases pass (finding cases %s/%s, controls with no finding %s/%s); "
      "worker context median %s MiB; %d traces kept, %d dropped" % (
          totals.get("passed"), totals.get("cases"), totals.get("finding_cases_passed"),
          totals.get("finding_cases"), totals.get("controls_with_no_finding"), totals.get("controls"),
          (totals.get("context_size") or {}).get("median_nvidia_smi_peak_mib"), len(kept),
          len(summary["traces_dropped_over_2MiB"])))
EOF
