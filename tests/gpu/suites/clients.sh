# The client matrix (issue 14): gpuleak on Lightning (one process; two on one
# GPU), HF Trainer, accelerate, torch.compile default and reduce-overhead,
# torchrun (2 ranks, one GPU), torch.profiler, JAX (preallocating and
# platform allocator), CuPy and a plain CUDA C++ program -- a planted leak
# and a control each (examples/clients/clients.json). Verdict runs go six at
# a time; the timing runs (without and with gpuleak, 40 steps) one at a time.
# Writes $R/summary.json (tests/gpu/client_matrix.py explains every field)
# and prints the table. Usually about 300 s; at most 410: run as clients:420.
# Alone on the machine (the timing runs want that), CLIENTS_SECONDS gives the
# matrix more time (default 290); CLIENTS_TIMING=0 runs the verdicts only (for
# a run beside other suites, once the timing runs were made alone).
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2
timeout "${CLIENTS_SECONDS:-290}" python3 tests/gpu/client_matrix.py --gpuleak "$D/gpuleak" --programs "$D/examples/clients" \
  --out "$R" --jobs 6 --timeout 150 --timing-steps 40 $([ "${CLIENTS_TIMING:-1}" = 0 ] && echo --no-timing) 2>&1 | tail -40
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|collector disabled" "$R"/*/log.txt 2>/dev/null | sed 's/^/collector trouble in: /'
true
# Why Lightning started the collector twice (issue 14): the Lightning control
# once more with the CUPTI backend and GPULEAK_VERBOSE=1; every start request
# (again, racing or re-entrant) is counted in the trace's capture_backend and
# said on stderr. Added to summary.json as lightning_cupti_diagnosis.
mkdir -p "$R/lightning-cupti"
( cd examples/clients && timeout 60 env GPULEAK_VERBOSE=1 "$D/gpuleak" run --backend cupti \
    -o "$R/lightning-cupti/traces" --json-report "$R/lightning-cupti/report.json" -- \
    python3 lightning/control_outputs_cleared_each_epoch.py --steps 40 ) > "$R/lightning-cupti/log.txt" 2>&1
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
diagnosis = {"what": "Lightning control under --backend cupti with GPULEAK_VERBOSE=1: capture_backend of each traced process and the collector's start-up lines"}
try:
    report = json.load(open(r + "/lightning-cupti/report.json"))
    diagnosis["processes"] = [{"pid": p.get("pid"), "command_line": " ".join(p.get("command_line") or [])[:160],
                               "capture_backend": p.get("capture_backend"), "collector_disabled": p.get("collector_disabled"),
                               "allocations": (p.get("events") or {}).get("allocations")} for p in report["processes"]]
except Exception as error:
    diagnosis["error"] = str(error)
diagnosis["collector_lines"] = [l.strip() for l in open(r + "/lightning-cupti/log.txt", errors="replace")
                                if "gpuleak:" in l and ("capture" in l or "InitializeInjection" in l or "disabled" in l or "CUPTI" in l)][:40]
summary_path = r + "/summary.json"
try:
    summary = json.load(open(summary_path))
except Exception:
    summary = {"pass": False, "error": "client_matrix.py wrote no summary"}
summary["lightning_cupti_diagnosis"] = diagnosis
json.dump(summary, open(summary_path, "w"), indent=1)
print(json.dumps(diagnosis, indent=1)[:3000])
PY
rm -rf "$R/lightning-cupti/traces"
