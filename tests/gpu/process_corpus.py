#!/usr/bin/env python3
"""Runs the process corpus (examples/processes/) under `gpuleak run` on a GPU and scores the reports.

Every case of examples/processes/corpus.json runs at once (they do not
interfere: each is judged by its own processes' pids), as

    <gpuleak> run -o <out>/<case>/traces --json-report <out>/<case>/report.json -- \\
        python3 examples/processes/<script> <args> --truth <out>/<case>/truth.json

while `nvidia-smi --query-compute-apps=pid,used_memory` is sampled every 0.5 s
(the per-process figure the report's device memory is checked against), and
`gpuleak doctor --json` every 2 s (whether doctor sees the DataLoader workers,
and why not: issue 13 saw none). The truth file each script writes names its
processes' pids by role. Checks per case (labels in corpus.json):

  exit_status     the program's exit status under gpuleak run
  roles           every truth pid has the expected role in job.processes
  findings        each expected finding is there, naming exactly the truth pids;
                  a control or error case has no process finding at all
  cuda_init       where the report says CUDA was first used is a `# CUDA-INIT` line
                  of the script, in the labelled function
  summary_line    processes that did no GPU work get no report section
  context_memory  the report's peak device memory of each process is within 10 %
                  of the largest nvidia-smi figure for its pid

Besides the cases it measures what a CUDA context costs (a driver-only context
through ctypes, and torch after its first tensor and after a matmul), each
alone in its process, read from nvidia-smi.

It writes <out>/summary.json (every check of every case, the context costs,
the doctor diagnosis, the commands) and prints a table. Every process it
starts is ended before it returns. Exit status 0 when every case passes.

    python3 tests/gpu/process_corpus.py --gpuleak dist/gpuleak --out /tmp/processes

Standard library only; paths resolve from this file.
"""
import argparse
import ast
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES_DIR = os.path.join(REPO, "examples", "processes")
SCHEMA = "gpuleak-process-corpus-results/1"
MARKER = re.compile(r"#\s*CUDA-INIT")
CHECKS = ("exit_status", "roles", "findings", "cuda_init", "summary_line", "context_memory")
# Cases whose traces are kept in the results (small), for the CI test of the analysis.
KEEP_TRACES = ("dataloader_getitem_cuda_spawn.py", "zombie_unreaped_child.py",
               "control_cpu_workers_spawn.py")
CONTEXT_TOLERANCE = 0.10


# ---------------------------------------------------------------------------
# Labels

def marked_lines(script_path):
    """{line: enclosing function qualname or None} for every `# CUDA-INIT` line."""
    with open(script_path, encoding="utf-8") as handle:
        text = handle.read()
    lines = [number for number, line in enumerate(text.splitlines(), start=1) if MARKER.search(line)]
    ranges = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    ranges.append((name, child.lineno, child.end_lineno))
                visit(child, name + ".")

    visit(ast.parse(text), "")
    out = {}
    for line in lines:
        inside = [r for r in ranges if r[1] <= line <= r[2]]
        out[line] = min(inside, key=lambda r: r[2] - r[1])[0] if inside else None
    return out


# ---------------------------------------------------------------------------
# Background samplers

class Sampler(threading.Thread):
    """Runs `command` every `interval_s` and hands its stdout to `keep`."""

    def __init__(self, command, interval_s, keep):
        super().__init__(daemon=True)
        self.command, self.interval_s, self.keep = command, interval_s, keep
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            started = time.monotonic()
            try:
                out = subprocess.run(self.command, capture_output=True, text=True, timeout=20).stdout
                self.keep(time.monotonic(), out)
            except (OSError, subprocess.SubprocessError):
                pass
            self.stopped.wait(max(0.0, self.interval_s - (time.monotonic() - started)))


class SmiApps:
    """nvidia-smi's per-process used memory, the largest seen per pid (MiB)."""

    def __init__(self):
        self.peak_mib = {}
        self.rows = 0
        self.lock = threading.Lock()

    def keep(self, _when, out):
        with self.lock:
            for row in csv.reader(io.StringIO(out)):
                if len(row) < 2:
                    continue
                try:
                    pid, used = int(row[0].strip()), float(row[1].strip())
                except ValueError:
                    continue
                self.rows += 1
                self.peak_mib[pid] = max(self.peak_mib.get(pid, 0.0), used)


class DoctorSnapshots:
    """The pids each `gpuleak doctor --json` listed, with their verdicts."""

    def __init__(self):
        self.snapshots = []
        self.lock = threading.Lock()

    def keep(self, when, out):
        try:
            data = json.loads(out)
        except ValueError:
            data = None
        with self.lock:
            if not isinstance(data, dict):
                self.snapshots.append({"time": when, "error": (out or "no output")[:200]})
                return
            listed = {}
            for process in data.get("processes") or []:
                if isinstance(process, dict) and isinstance(process.get("pid"), int):
                    listed[process["pid"]] = {
                        "verdict": process.get("verdict"),
                        "gpu_memory_bytes": process.get("gpu_memory_bytes"),
                        "relation": (process.get("relation") or {}).get("kind")
                        if isinstance(process.get("relation"), dict) else process.get("relation"),
                        "device_files": process.get("device_files"),
                    }
            kinds = [f.get("kind") for f in data.get("findings") or [] if isinstance(f, dict)]
            self.snapshots.append({"time": when, "listed": listed, "finding_kinds": kinds,
                                   "nvml": data.get("nvml")})


# ---------------------------------------------------------------------------
# Running

def start_case(case, gpuleak, out):
    name = case["script"][:-3]
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    command = [gpuleak, "run", "-o", os.path.join(folder, "traces"),
               "--json-report", os.path.join(folder, "report.json"), "--",
               sys.executable, os.path.join(CASES_DIR, case["script"])] + case.get("args", []) + \
              ["--truth", os.path.join(folder, "truth.json")]
    log = open(os.path.join(folder, "run.log"), "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, cwd=REPO)
    return {"case": case, "folder": folder, "command": command, "process": process, "log": log,
            "started": time.monotonic()}


CONTEXT_PROBES = {
    # What the driver counts for a context alone: cuInit + primary context, no library loaded.
    "driver_context_only": r"""
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
device, context = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
assert cuda.cuCtxSetCurrent(context) == 0
print("ready", flush=True); time.sleep(float(sys.argv[1]))
""",
    # torch after its first (one-element) tensor: context + torch's modules as loaded lazily.
    "torch_first_tensor": r"""
import sys, time, torch
x = torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print("ready", flush=True); time.sleep(float(sys.argv[1]))
""",
    # torch after a matmul: cuBLAS's handle and workspace too.
    "torch_after_matmul": r"""
import sys, time, torch
a = torch.randn(256, 256, device="cuda"); (a @ a).sum().item()
print("ready", flush=True); time.sleep(float(sys.argv[1]))
""",
}


def start_probes():
    probes = {}
    for name, code in CONTEXT_PROBES.items():
        probes[name] = subprocess.Popen([sys.executable, "-c", code, "12"], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return probes


def end_group(process):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        time.sleep(0.3)


def end_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):
            pass


# ---------------------------------------------------------------------------
# Scoring

def load_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle), None
    except (OSError, ValueError) as error:
        return None, "%s: %s" % (os.path.basename(path), error)


def truth_pids(truth, key):
    value = truth.get(key)
    if isinstance(value, int):
        return [value]
    return [pid for pid in value or [] if isinstance(pid, int)]


def score_case(run, smi, text_report):
    case = run["case"]
    expected = case["expected"]
    result = {"script": case["script"], "kind": case["kind"], "exit_status": run.get("status"),
              "checks": {}, "problems": []}
    truth, why = load_json(os.path.join(run["folder"], "truth.json"))
    report, why_report = load_json(os.path.join(run["folder"], "report.json"))
    checks = result["checks"]
    checks["exit_status"] = run.get("status") == expected["exit_status"]
    if not checks["exit_status"]:
        result["problems"].append("exit status %s, expected %s" % (run.get("status"),
                                                                   expected["exit_status"]))
    if truth is None or report is None or not isinstance(report.get("job"), dict):
        result["problems"].append(why or why_report or "report.json has no 'job' object")
        for check in CHECKS[1:]:
            checks[check] = False
        return result
    result["truth"] = truth
    job = report["job"]
    by_pid = {p.get("pid"): p for p in job.get("processes") or [] if isinstance(p, dict)}
    result["roles_reported"] = {str(pid): p.get("role") for pid, p in by_pid.items()}

    ok = True
    for role, key in expected["roles"].items():
        for pid in truth_pids(truth, key):
            got = (by_pid.get(pid) or {}).get("role")
            if got != role:
                ok = False
                result["problems"].append("PID %d (%s): role %r, expected %r" % (pid, key, got, role))
    checks["roles"] = ok

    findings = [f for f in job.get("findings") or [] if isinstance(f, dict)]
    result["findings_reported"] = [{"kind": f.get("kind"), "pids": f.get("pids"),
                                    "summary": f.get("summary")} for f in findings]
    ok = True
    if not expected["findings"] and findings:
        ok = False
        result["problems"].append("a %s case has findings: %s" % (
            case["kind"], "; ".join(str(f.get("summary")) for f in findings)))
    for want in expected["findings"]:
        pids = sorted(truth_pids(truth, want["processes"]))
        match = [f for f in findings if f.get("kind") == want["kind"]]
        if not match:
            ok = False
            result["problems"].append("no %s finding" % want["kind"])
        elif sorted(match[0].get("pids") or []) != pids:
            ok = False
            result["problems"].append("%s names PIDs %s, expected %s" % (
                want["kind"], sorted(match[0].get("pids") or []), pids))
    checks["findings"] = ok

    marks = marked_lines(os.path.join(CASES_DIR, case["script"]))
    ok = True
    for key, where in expected["cuda_init"].items():
        allowed = {line for line, function in marks.items()
                   if where.get("function") in (None, function)}
        for pid in truth_pids(truth, key):
            use = (by_pid.get(pid) or {}).get("cuda_first_use") or {}
            site = use.get("site") or {}
            on_line = os.path.basename(str(site.get("file") or "")) == case["script"] and \
                site.get("line") in allowed
            if not on_line:
                ok = False
                result["problems"].append("PID %d (%s): CUDA first used at %s, expected %s:%s" % (
                    pid, key, site.get("label"), case["script"], sorted(allowed)))
    checks["cuda_init"] = ok

    ok = True
    for key in expected["summary_line_only"]:
        for pid in truth_pids(truth, key):
            process = by_pid.get(pid)
            section = re.search(r"^gpuleak: process %d \(" % pid, text_report, re.MULTILINE)
            if process is None or process.get("gpu_work") or section:
                ok = False
                result["problems"].append("PID %d (%s): %s" % (
                    pid, key, "not in the report" if process is None else "has a section"))
    checks["summary_line"] = ok

    ok = True
    memory = []
    for key in expected["context_memory"]:
        for pid in truth_pids(truth, key):
            view = (by_pid.get(pid) or {}).get("device_memory") or {}
            reported = view.get("peak_used_bytes")
            smi_mib = smi.peak_mib.get(pid)
            entry = {"pid": pid, "role": key, "report_peak_bytes": reported,
                     "nvidia_smi_peak_mib": smi_mib,
                     "context_and_modules_bytes": view.get("context_and_modules_bytes")}
            if reported is None or smi_mib is None:
                ok = False
                result["problems"].append("PID %d (%s): device memory %s, nvidia-smi %s" % (
                    pid, key, reported, smi_mib))
            else:
                ratio = (reported / 2**20) / smi_mib if smi_mib else None
                entry["ratio"] = ratio
                if ratio is None or abs(ratio - 1) > CONTEXT_TOLERANCE:
                    ok = False
                    result["problems"].append("PID %d (%s): %.0f MiB reported, nvidia-smi %.0f MiB" %
                                              (pid, key, reported / 2**20, smi_mib))
            memory.append(entry)
    checks["context_memory"] = ok
    result["device_memory"] = memory
    return result


def doctor_diagnosis(doctor, smi, spawn_result):
    """Which DataLoader workers doctor listed, versus nvidia-smi (issue 13 saw none)."""
    truth = (spawn_result or {}).get("truth") or {}
    workers = truth_pids(truth, "dataloader_worker")
    snapshots = doctor.snapshots
    seen, named = set(), set()
    for snap in snapshots:
        for pid in workers:
            entry = (snap.get("listed") or {}).get(pid)
            if entry:
                seen.add(pid)
                if entry.get("verdict") == "worker":
                    named.add(pid)
    return {
        "what": "every 2 s during the run, `gpuleak doctor --json`; did it list the spawn case's "
                "DataLoader workers (and call them workers), and did nvidia-smi list them?",
        "workers": workers,
        "doctor_snapshots": len(snapshots),
        "doctor_errors": [s["error"] for s in snapshots if "error" in s][:3],
        "listed_by_doctor": sorted(seen),
        "named_worker_by_doctor": sorted(named),
        "listed_by_nvidia_smi": sorted(pid for pid in workers if pid in smi.peak_mib),
        "nvidia_smi_pids_not_in_any_case": sorted(set(smi.peak_mib) - set(
            pid for snap in snapshots for pid in (snap.get("listed") or {}))),
        "last_snapshot": snapshots[-1] if snapshots else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=100.0, help="seconds per case")
    args = parser.parse_args()
    gpuleak = os.path.abspath(args.gpuleak)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(CASES_DIR, "corpus.json"), encoding="utf-8") as handle:
        corpus = json.load(handle)

    smi, doctor = SmiApps(), DoctorSnapshots()
    samplers = [
        Sampler(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                 "--format=csv,noheader,nounits"], 0.5, smi.keep),
        Sampler([gpuleak, "doctor", "--json"], 2.0, doctor.keep),
    ]
    for sampler in samplers:
        sampler.start()
    started = time.monotonic()
    runs = [start_case(case, gpuleak, out) for case in corpus["cases"]]
    probes = start_probes()
    leftover = []
    try:
        for run in runs:
            remaining = args.timeout - (time.monotonic() - run["started"])
            try:
                run["status"] = run["process"].wait(timeout=max(1.0, remaining))
            except subprocess.TimeoutExpired:
                run["status"] = "timeout"
                end_group(run["process"])
            run["seconds"] = round(time.monotonic() - run["started"], 1)
            run["log"].close()
    finally:
        for sampler in samplers:
            sampler.stopped.set()
        for sampler in samplers:
            sampler.join(timeout=25)
        for probe in probes.values():
            end_group(probe)
        for run in runs:
            # Orphans a case leaves by design (they end themselves anyway): the
            # processes the report saw still running at the end.
            report, _ = load_json(os.path.join(run["folder"], "report.json"))
            for process in ((report or {}).get("job") or {}).get("processes") or []:
                if isinstance(process, dict) and process.get("alive_at_end"):
                    leftover.append(process.get("pid"))
        end_pids(leftover)

    results = []
    for run in runs:
        with open(os.path.join(run["folder"], "run.log"), errors="replace") as handle:
            text_report = handle.read()
        result = score_case(run, smi, text_report)
        result["seconds"] = run.get("seconds")
        result["command"] = " ".join(run["command"])
        result["passed"] = all(result["checks"].get(check) for check in CHECKS)
        results.append(result)
        traces = os.path.join(run["folder"], "traces")
        if run["case"]["script"] not in KEEP_TRACES:
            subprocess.run(["rm", "-rf", traces])

    contexts = {}
    for name, probe in probes.items():
        pid = probe.pid
        contexts[name] = {"pid": pid, "nvidia_smi_peak_mib": smi.peak_mib.get(pid)}
    spawn = next((r for r in results if r["script"] == "dataloader_getitem_cuda_spawn.py"), None)
    summary = {
        "schema": SCHEMA,
        "about": "issue 13: every process case of examples/processes under `gpuleak run`: roles, "
                 "process findings (none on controls), CUDA first-use line, device memory vs "
                 "nvidia-smi (within 10 %); plus what a CUDA context costs and what "
                 "`gpuleak doctor` saw of DataLoader workers",
        "passed": sum(r["passed"] for r in results),
        "cases": len(results),
        "checks_passed": {check: sum(bool(r["checks"].get(check)) for r in results)
                          for check in CHECKS},
        "seconds": round(time.monotonic() - started, 1),
        "nvidia_smi_rows": smi.rows,
        "context_cost": contexts,
        "doctor": doctor_diagnosis(doctor, smi, spawn),
        "results": results,
        "kept_traces": [r["script"] for r in results if r["script"] in KEEP_TRACES],
    }
    with open(os.path.join(out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    print("%-44s %-8s %s" % ("case", "result", "problems"))
    for r in results:
        print("%-44s %-8s %s" % (r["script"], "pass" if r["passed"] else "FAIL",
                                 "; ".join(r["problems"])[:160]))
    print("passed %d/%d; context MiB: %s" % (summary["passed"], summary["cases"], ", ".join(
        "%s %s" % (k, v["nvidia_smi_peak_mib"]) for k, v in contexts.items())))
    print("doctor listed workers %s of %s (nvidia-smi: %s)" % (
        summary["doctor"]["listed_by_doctor"], summary["doctor"]["workers"],
        summary["doctor"]["listed_by_nvidia_smi"]))
    return 0 if summary["passed"] == summary["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
