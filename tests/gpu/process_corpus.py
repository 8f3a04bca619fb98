#!/usr/bin/env python3
"""Runs the process corpus (examples/processes/) under `gpuleak run` on a GPU and scores the reports.

Issue 13: `gpuleak run` must name the job's processes, their roles, their
device memory, where CUDA was first used in each, and the process findings.
For every case of examples/processes/corpus.json it runs, up to --jobs at a
time (no case measures time), each in its own session and killed at --timeout,

    <gpuleak> run -o <out>/<case>/traces --json-report <out>/<case>/report.json -- \\
        python3 examples/processes/<script> --truth <out>/<case>/truth.json <args>

(<case> is the script's name without .py; the text report and the program's
output go to <out>/<case>/run.log). While the cases run it samples
`nvidia-smi --query-compute-apps=pid,used_memory` every 0.5 s (each pid's
peak MiB), and while a dataloader_* case runs, `gpuleak doctor --json` every
3 s (which of the case's processes doctor listed, and its verdicts). The truth
file each script writes names its processes' pids by role. What was observed
of a run (exit status, nvidia-smi peaks, doctor's listings) is kept in
<out>/<case>/run.json, so the case can be scored again later (--rescore).

Checks per case, as the 'fields' section of corpus.json defines the labels:

  exit_status        the program's exit status under gpuleak run (128 + signal when a signal ended it)
  roles              every pid under the truth key has that role in report['job']['processes']
  findings           the kinds of job.findings equal the labelled kinds, and each finding names
                     exactly the truth key's pids; an empty label means no finding at all
  cuda_init          each truth pid's cuda_first_use.site is at a line of the script marked
                     `# CUDA-INIT`, and site.function ends with the labelled function, when given
  summary_line_only  those processes are in job.processes with gpu_work false and have no
                     section ("gpuleak: process PID (") in the text report
  context_memory     each process's device_memory.peak_used_bytes is within 10 % of
                     nvidia-smi's peak for its pid

A check whose label is empty does not apply (null). Each check passes or fails
on its own; a case passes when every check that applies passes. A missing or
malformed report (or truth file) fails that case and the run goes on.

Besides the cases it measures what a CUDA context costs, each alone in its
process, read from nvidia-smi (context_cost: a driver-only context through
ctypes, torch after its first tensor, after a matmul), and the context size of
the corpus's own workers (context_size: the median nvidia-smi peak of the
DataLoader workers of the worker_context cases).

It writes <out>/process-corpus.json after every case (so a run cut short keeps
what it finished) and prints a table. Traces are removed after scoring except
for the cases of --keep-traces (their <out>/<case>/traces and truth.json are
what tests/analysis/recorded_process_traces_test.cpp reads once copied to
examples/traces/processes/). Every process a case leaves (an orphan, by
design) is ended by its id when the case is done. Exit status: 0 when every
case passes, 1 otherwise, 2 for bad arguments.

    python3 tests/gpu/process_corpus.py --gpuleak dist/gpuleak --out /tmp/processes
    python3 tests/gpu/process_corpus.py --rescore /tmp/processes --out /tmp/rescored
    python3 tests/gpu/process_corpus.py --rescore /tmp/processes --gpuleak build/gpuleak --out /tmp/re

--rescore DIR runs no program: it scores DIR/<case>/ of an earlier run
(run.json, truth.json, report.json, run.log); with --gpuleak too, and
DIR/<case>/traces there, it first makes the report again from the traces
(`gpuleak report DIR/<case>/traces --json-report ...`): the current analysis
on recorded traces, no GPU needed. Standard library only (Python 3.8+); run
from anywhere, paths resolve from this file.
"""
import argparse
import ast
import concurrent.futures
import csv
import io
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES_DIR = os.path.join(REPO, "examples", "processes")
CORPUS_JSON = os.path.join(CASES_DIR, "corpus.json")
SCHEMA = "gpuleak-process-corpus-results/1"
REPORT_SCHEMA = "gpuleak-report/1"
CHECKS = ("exit_status", "roles", "findings", "cuda_init", "summary_line_only", "context_memory")
MARKER = re.compile(r"#\s*CUDA-INIT")
CONTEXT_TOLERANCE = 0.10
MIB = 2**20
SMI_INTERVAL_S = 0.5
DOCTOR_INTERVAL_S = 3.0
# Small cases whose traces stay (for the CI test of the job analysis):
# a worker_context finding, a zombie, and a control with CPU-only workers.
DEFAULT_KEEP_TRACES = ("dataloader_getitem_cuda_spawn", "zombie_unreaped_child", "control_cpu_workers_spawn")
# Sessions of the cases now running (their `gpuleak run` pids): ended on SIGTERM too.
RUNNING_SESSIONS = set()


def case_id(case):
    return os.path.splitext(case["script"])[0]


# ---------------------------------------------------------------------------
# Reading files


def load_json(path, what):
    """(value, None) or (None, why it cannot be used)."""
    if not os.path.exists(path):
        return None, "no %s: %s was not written" % (what, os.path.basename(path))
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle), None
    except (OSError, ValueError) as error:
        return None, "%s is not JSON: %s" % (what, error)


def check_report(report):
    """None when the report has the shape scoring needs, else why not."""
    if not isinstance(report, dict):
        return "the report is not a JSON object"
    if report.get("schema") != REPORT_SCHEMA:
        return "report schema is %r, expected %r" % (report.get("schema"), REPORT_SCHEMA)
    job = report.get("job")
    if not isinstance(job, dict):
        return "the report has no 'job' object"
    if not isinstance(job.get("processes"), list) or not isinstance(job.get("findings"), list):
        return "the report's job has no 'processes' or 'findings' list"
    return None


def truth_pids(truth, key):
    """The pids the script wrote under key (an int or a list of ints), or None when it wrote none."""
    value = truth.get(key) if isinstance(truth, dict) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, list) and value and all(isinstance(p, int) and not isinstance(p, bool) for p in value):
        return list(value)
    return None


def marked_lines(script_path):
    """{line number: innermost enclosing function's qualified name, or None} of the `# CUDA-INIT` lines."""
    with open(script_path, encoding="utf-8") as handle:
        text = handle.read()
    ranges = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    ranges.append((name, child.lineno, child.end_lineno))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    out = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if MARKER.search(line):
            inside = [r for r in ranges if r[1] <= number <= r[2]]
            out[number] = min(inside, key=lambda r: r[2] - r[1])[0] if inside else None
    return out


def function_matches(reported, labelled):
    """The labelled name is a suffix of the reported one, at a name boundary ("a.B.f" matches "B.f")."""
    reported = str(reported or "")
    if reported == labelled:
        return True
    return reported.endswith(labelled) and reported[-len(labelled) - 1] in ".:"


# ---------------------------------------------------------------------------
# Scoring one case


def score_case(case, truth, report, observed, text_report, script_path=None):
    """{checks: {name: True/False/None}, why: {name: [reasons]}, pass, ...} for one case.

    truth, report: the parsed files or None; observed: run.json's content
    (exit_status, nvidia_smi_peak_mib {pid: MiB}, ...); text_report: the text
    of run.log or None when not known."""
    expected = case["expected"]
    checks, why = {}, {}
    record = {"checks": checks, "why": why}

    def verdict(name, reasons, applies=True):
        checks[name] = (not reasons) if applies else None
        if reasons:
            why[name] = reasons

    status = observed.get("exit_status")
    if observed.get("timed_out"):
        verdict("exit_status", ["timed out after %s s" % observed.get("timeout_s")])
    else:
        verdict(
            "exit_status",
            []
            if status == expected["exit_status"]
            else ["exit status %s, expected %s" % (status, expected["exit_status"])],
        )

    problem = check_report(report) if report is not None else observed.get("report_error") or "no report"
    if truth is None or not isinstance(truth, dict):
        problem = observed.get("truth_error") or "the truth file is not a JSON object"
    if problem:
        for name in CHECKS[1:]:
            verdict(name, ["cannot score: %s" % problem], applies=label_applies(case, name))
        record["pass"] = all(value is not False for value in checks.values())
        record["error"] = problem
        return record

    job = report["job"]
    by_pid = {}
    for process in job["processes"]:
        if isinstance(process, dict) and isinstance(process.get("pid"), int):
            by_pid[process["pid"]] = process
    record["reported_processes"] = [
        {"pid": p.get("pid"), "role": p.get("role"), "gpu_work": p.get("gpu_work"), "summary": p.get("summary")}
        for p in by_pid.values()
    ]

    def pids_or_reason(key, reasons):
        pids = truth_pids(truth, key)
        if pids is None:
            reasons.append("the truth file has no pids under %r" % key)
        return pids or []

    # roles
    reasons = []
    for role, key in expected["roles"].items():
        for pid in pids_or_reason(key, reasons):
            process = by_pid.get(pid)
            if process is None:
                reasons.append("PID %d (%s) is not in job.processes" % (pid, key))
            elif process.get("role") != role:
                reasons.append("PID %d (%s): role %r, expected %r" % (pid, key, process.get("role"), role))
    verdict("roles", reasons)

    # findings
    findings = [f for f in job["findings"] if isinstance(f, dict)]
    record["reported_findings"] = [
        {"kind": f.get("kind"), "pids": f.get("pids"), "summary": f.get("summary")} for f in findings
    ]
    reasons = []
    want_kinds = sorted(f["kind"] for f in expected["findings"])
    got_kinds = sorted(str(f.get("kind")) for f in findings)
    if got_kinds != want_kinds:
        reasons.append("finding kinds %s, expected %s" % (got_kinds or "none", want_kinds or "none"))
    unmatched = list(findings)
    for want in expected["findings"]:
        pids = sorted(set(pids_or_reason(want["processes"], reasons)))
        same_kind = [f for f in unmatched if f.get("kind") == want["kind"]]
        exact = [f for f in same_kind if isinstance(f.get("pids"), list) and sorted(set(f["pids"])) == pids]
        if exact:
            unmatched.remove(exact[0])
        elif same_kind:
            reasons.append(
                "%s names PIDs %s, expected %s (%s)"
                % (want["kind"], sorted(same_kind[0].get("pids") or []), pids, want["processes"])
            )
    verdict("findings", reasons)

    # cuda_init
    reasons = []
    if expected["cuda_init"]:
        marks = marked_lines(script_path or os.path.join(CASES_DIR, case["script"]))
        for key, where in expected["cuda_init"].items():
            function = (where or {}).get("function")
            for pid in pids_or_reason(key, reasons):
                use = (by_pid.get(pid) or {}).get("cuda_first_use")
                site = use.get("site") if isinstance(use, dict) else None
                if not isinstance(site, dict):
                    reasons.append("PID %d (%s): no cuda_first_use.site" % (pid, key))
                    continue
                where_text = "%s:%s (in %s)" % (
                    os.path.basename(str(site.get("file"))),
                    site.get("line"),
                    site.get("function"),
                )
                if os.path.basename(str(site.get("file") or "")) != case["script"]:
                    reasons.append(
                        "PID %d (%s): CUDA first used at %s, not in %s" % (pid, key, where_text, case["script"])
                    )
                elif site.get("line") not in marks:
                    reasons.append(
                        "PID %d (%s): CUDA first used at %s, not a CUDA-INIT line (%s)"
                        % (pid, key, where_text, sorted(marks))
                    )
                elif function and not function_matches(site.get("function"), function):
                    reasons.append(
                        "PID %d (%s): CUDA first used at %s, expected in %s" % (pid, key, where_text, function)
                    )
    verdict("cuda_init", reasons, applies=bool(expected["cuda_init"]))

    # summary_line_only
    reasons = []
    for key in expected["summary_line_only"]:
        for pid in pids_or_reason(key, reasons):
            process = by_pid.get(pid)
            if process is None:
                reasons.append("PID %d (%s) is not in job.processes (no summary line)" % (pid, key))
                continue
            if process.get("gpu_work") is not False:
                reasons.append("PID %d (%s): gpu_work is %r" % (pid, key, process.get("gpu_work")))
            if text_report is not None and re.search(r"^gpuleak: process %d \(" % pid, text_report, re.MULTILINE):
                reasons.append("PID %d (%s) has a section in the text report" % (pid, key))
    verdict("summary_line_only", reasons, applies=bool(expected["summary_line_only"]))

    # context_memory
    reasons, memory = [], []
    smi_peaks = observed.get("nvidia_smi_peak_mib") or {}
    for key in expected["context_memory"]:
        for pid in pids_or_reason(key, reasons):
            view = (by_pid.get(pid) or {}).get("device_memory")
            reported = view.get("peak_used_bytes") if isinstance(view, dict) else None
            smi_mib = smi_peaks.get(str(pid))
            entry = {
                "pid": pid,
                "key": key,
                "report_peak_mib": None if reported is None else round(reported / MIB, 1),
                "nvidia_smi_peak_mib": smi_mib,
                "report_context_and_modules_mib": round(view["context_and_modules_bytes"] / MIB, 1)
                if isinstance(view, dict) and isinstance(view.get("context_and_modules_bytes"), (int, float))
                else None,
            }
            memory.append(entry)
            if not isinstance(reported, (int, float)):
                reasons.append("PID %d (%s): the report has no device_memory.peak_used_bytes" % (pid, key))
            elif not isinstance(smi_mib, (int, float)) or smi_mib <= 0:
                reasons.append("PID %d (%s): nvidia-smi never listed it" % (pid, key))
            else:
                entry["ratio"] = round(reported / MIB / smi_mib, 3)
                if abs(reported / MIB - smi_mib) > CONTEXT_TOLERANCE * smi_mib:
                    reasons.append(
                        "PID %d (%s): report %.0f MiB, nvidia-smi %.0f MiB (more than 10 %% apart)"
                        % (pid, key, reported / MIB, smi_mib)
                    )
    record["device_memory"] = memory
    verdict("context_memory", reasons, applies=bool(expected["context_memory"]))

    record["pass"] = all(value is not False for value in checks.values())
    return record


def label_applies(case, check):
    if check in ("exit_status", "roles", "findings"):
        return True
    return bool(case["expected"].get(check))


# ---------------------------------------------------------------------------
# Background samplers


class Sampler(threading.Thread):
    """Runs `command` every `interval_s` (a timeout on each) and hands its stdout to `keep`."""

    def __init__(self, command, interval_s, keep):
        super().__init__(daemon=True)
        self.command, self.interval_s, self.keep = command, interval_s, keep
        self.stopped = threading.Event()
        self.failures = 0

    def run(self):
        while not self.stopped.is_set():
            started = time.monotonic()
            try:
                done = subprocess.run(
                    self.command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, timeout=20
                )
                self.keep(started, done.stdout)
            except (OSError, subprocess.SubprocessError):
                self.failures += 1
            self.stopped.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self):
        self.stopped.set()
        self.join(timeout=25)


class SmiPeaks:
    """nvidia-smi's per-process used memory: the largest figure seen for each pid (MiB)."""

    def __init__(self):
        self.peak_mib, self.samples, self.lock = {}, 0, threading.Lock()

    def keep(self, _when, out):
        with self.lock:
            self.samples += 1
            for row in csv.reader(io.StringIO(out)):
                if len(row) < 2:
                    continue
                try:
                    pid, used = int(row[0].strip()), float(row[1].strip())
                except ValueError:
                    continue  # "[N/A]", or a message instead of rows
                self.peak_mib[pid] = max(self.peak_mib.get(pid, 0.0), used)

    def peaks_of(self, pids):
        with self.lock:
            return {str(pid): self.peak_mib[pid] for pid in sorted(pids) if pid in self.peak_mib}


class DoctorListings:
    """What each `gpuleak doctor --json` listed: per snapshot, every pid with its verdict and relation."""

    def __init__(self, started):
        self.started, self.snapshots, self.lock = started, [], threading.Lock()

    def keep(self, when, out):
        try:
            data = json.loads(out)
        except ValueError:
            data = None
        entry = {"time_s": round(when - self.started, 1)}
        if not isinstance(data, dict) or not isinstance(data.get("processes"), list):
            entry["error"] = (out or "no output").strip()[:200]
        else:
            listed = {}
            for process in data["processes"]:
                if isinstance(process, dict) and isinstance(process.get("pid"), int):
                    relation = process.get("relation")
                    listed[str(process["pid"])] = {
                        "verdict": process.get("verdict"),
                        "relation": relation.get("kind") if isinstance(relation, dict) else relation,
                        "gpu_memory_bytes": process.get("gpu_memory_bytes"),
                    }
            entry["listed"] = listed
            entry["findings"] = [
                [f.get("kind"), f.get("pid")] for f in data.get("findings") or [] if isinstance(f, dict)
            ]
        with self.lock:
            self.snapshots.append(entry)


def doctor_view(snapshots, truth):
    """Which of the case's truth pids doctor listed, in how many snapshots, with which verdicts."""
    if snapshots is None:
        return None
    pids = {}
    for key, value in (truth or {}).items():
        for pid in truth_pids(truth, key) or []:
            pids[str(pid)] = key
    seen = {pid: {"key": key, "listed_in": 0, "verdicts": [], "relations": []} for pid, key in pids.items()}
    for snapshot in snapshots:
        for pid, entry in (snapshot.get("listed") or {}).items():
            if pid in seen:
                seen[pid]["listed_in"] += 1
                for field, into in (("verdict", "verdicts"), ("relation", "relations")):
                    if entry.get(field) not in seen[pid][into]:
                        seen[pid][into].append(entry.get(field))
    return {
        "snapshots": len(snapshots),
        "errors": [s["error"] for s in snapshots if "error" in s][:3],
        "truth_pids_listed": sorted(int(pid) for pid, s in seen.items() if s["listed_in"]),
        "truth_pids_not_listed": sorted(int(pid) for pid, s in seen.items() if not s["listed_in"]),
        "per_pid": seen,
    }


# ---------------------------------------------------------------------------
# Running one case


def session_members(session_id):
    """Pids of the processes in a session (what a case's `gpuleak run` and its program started)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(session_id) and int(name) != os.getpid():
            members.append(int(name))
    return members


def end_session(session_id):
    """SIGTERM, then SIGKILL, every process left in the case's session, by its id."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        members = session_members(session_id)
        if not members:
            return []
        for pid in members:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(1.0)
    return session_members(session_id)


def exit_status(returncode):
    """A shell's view of it: 128 + signal when a signal ended it."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


def case_command(args, case, case_dir):
    program = [
        args.python,
        os.path.join("examples", "processes", case["script"]),
        "--truth",
        os.path.join(case_dir, "truth.json"),
    ] + list(case.get("args", []))
    return [
        args.gpuleak,
        "run",
        "-o",
        os.path.join(case_dir, "traces"),
        "--json-report",
        os.path.join(case_dir, "report.json"),
        "--",
    ] + program


def run_case(args, case, smi):
    """Runs one case under gpuleak run; writes <out>/<case>/run.json; returns what was observed."""
    case_dir = os.path.join(args.out, case_id(case))
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)  # gpuleak refuses a folder with traces of an earlier run
    os.makedirs(case_dir)
    command = case_command(args, case, case_dir)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("OMP_NUM_THREADS", "2")
    started = time.monotonic()
    doctor = DoctorListings(started) if case["script"].startswith("dataloader_") else None
    sampler = Sampler([args.gpuleak, "doctor", "--json"], DOCTOR_INTERVAL_S, doctor.keep) if doctor else None
    observed = {"command": command, "timeout_s": args.timeout, "timed_out": False}
    with open(os.path.join(case_dir, "run.log"), "w", encoding="utf-8") as log:
        log.write("$ %s\n" % " ".join(shlex.quote(word) for word in command))
        log.flush()
        try:
            child = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as error:
            log.write("cannot start: %s\n" % error)
            child = None
        if child is not None:
            RUNNING_SESSIONS.add(child.pid)
        if sampler:
            sampler.start()
        if child is not None:
            try:
                returncode = child.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                observed["timed_out"] = True
                end_session(child.pid)
                try:
                    returncode = child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    returncode = None
                log.write("\nkilled after %s s\n" % args.timeout)
            observed["exit_status"] = exit_status(returncode)
            # What the case leaves running (the orphan case's child, by design) is ended now.
            observed["left_running_and_ended"] = session_members(child.pid)
            observed["not_ended"] = end_session(child.pid)
            RUNNING_SESSIONS.discard(child.pid)
    if sampler:
        sampler.stop()
    observed["wall_s"] = round(time.monotonic() - started, 1)
    truth, truth_error = load_json(os.path.join(case_dir, "truth.json"), "truth file")
    report, report_error = load_json(os.path.join(case_dir, "report.json"), "report")
    pids = set()
    for key in (truth or {}) if isinstance(truth, dict) else ():
        pids.update(truth_pids(truth, key) or [])
    if isinstance(report, dict) and isinstance(report.get("job"), dict):
        pids.update(
            p.get("pid")
            for p in report["job"].get("processes") or []
            if isinstance(p, dict) and isinstance(p.get("pid"), int)
        )
    observed["nvidia_smi_peak_mib"] = smi.peaks_of(pids)
    observed["doctor_snapshots"] = (
        None
        if doctor is None
        else [
            dict(s, listed={pid: v for pid, v in (s.get("listed") or {}).items() if int(pid) in pids})
            for s in doctor.snapshots
        ]
    )
    observed["report_error"], observed["truth_error"] = report_error, truth_error
    write_json(os.path.join(case_dir, "run.json"), observed)
    return observed


def rescore_observed(args, case):
    """What an earlier run observed of a case (DIR/<case>/run.json), its report made again when asked."""
    source = os.path.join(args.rescore, case_id(case))
    observed, error = load_json(os.path.join(source, "run.json"), "run record")
    observed = observed if isinstance(observed, dict) else {"report_error": error, "exit_status": None}
    case_dir = os.path.join(args.out, case_id(case))
    os.makedirs(case_dir, exist_ok=True)
    traces = os.path.join(source, "traces")
    if args.gpuleak and os.path.isdir(traces):
        report_path = os.path.join(case_dir, "report.json")
        if os.path.abspath(report_path) == os.path.abspath(os.path.join(source, "report.json")):
            os.replace(report_path, report_path + ".recorded")
        command = [args.gpuleak, "report", traces, "--json-report", report_path]
        with open(os.path.join(case_dir, "report.txt"), "w", encoding="utf-8") as text:
            try:
                subprocess.run(command, stdout=text, stderr=subprocess.STDOUT, timeout=args.timeout)
            except (OSError, subprocess.SubprocessError) as failure:
                text.write("gpuleak report failed: %s\n" % failure)
        observed["rescored_with"] = command
        observed["text_report_file"] = os.path.join(case_dir, "report.txt")
    else:
        observed["rescored_with"] = None
        observed["text_report_file"] = os.path.join(source, "run.log")
        if os.path.abspath(case_dir) != os.path.abspath(source) and os.path.exists(os.path.join(source, "report.json")):
            shutil.copyfile(os.path.join(source, "report.json"), os.path.join(case_dir, "report.json"))
    if os.path.abspath(case_dir) != os.path.abspath(source) and os.path.exists(os.path.join(source, "truth.json")):
        shutil.copyfile(os.path.join(source, "truth.json"), os.path.join(case_dir, "truth.json"))
    return observed


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def case_record(args, case, smi):
    """Runs (or re-reads) one case and scores it; never raises for a bad report."""
    case_dir = os.path.join(args.out, case_id(case))
    if args.rescore:
        observed = rescore_observed(args, case)
        text = read_text(observed.get("text_report_file"))
    else:
        observed = run_case(args, case, smi)
        text = read_text(os.path.join(case_dir, "run.log"))
    truth, truth_error = load_json(os.path.join(case_dir, "truth.json"), "truth file")
    report, report_error = load_json(os.path.join(case_dir, "report.json"), "report")
    observed = dict(observed, truth_error=truth_error or observed.get("truth_error"), report_error=report_error)
    try:
        record = score_case(case, truth, report, observed, text)
    except Exception as failure:  # a report of an unexpected shape must not stop the run
        why = "could not score the report: %s: %s" % (type(failure).__name__, failure)
        record = {
            "checks": {c: False if label_applies(case, c) else None for c in CHECKS},
            "why": {"report": [why]},
            "pass": False,
            "error": why,
        }
    record.update(
        {
            "case": case_id(case),
            "script": case["script"],
            "kind": case["kind"],
            "covers": case["covers"],
            "expected": case["expected"],
            "truth": truth,
            "exit_status": observed.get("exit_status"),
            "timed_out": observed.get("timed_out"),
            "wall_s": observed.get("wall_s"),
            "command": observed.get("command"),
            "rescored_with": observed.get("rescored_with"),
            "nvidia_smi_peak_mib": observed.get("nvidia_smi_peak_mib"),
            "left_running_and_ended": observed.get("left_running_and_ended"),
            "doctor": doctor_view(observed.get("doctor_snapshots"), truth),
        }
    )
    traces = os.path.join(case_dir, "traces")
    if not args.rescore and case_id(case) not in args.keep_traces and os.path.isdir(traces):
        shutil.rmtree(traces, ignore_errors=True)
    return record


# ---------------------------------------------------------------------------
# What a context costs, each alone in its process

CONTEXT_PROBES = {
    # cuInit and the primary context through ctypes, no library loaded.
    "driver_context_only": r"""
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
device, context = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
assert cuda.cuCtxSetCurrent(context) == 0
time.sleep(float(sys.argv[1]))
""",
    # torch after its first one-element tensor.
    "torch_first_tensor": r"""
import sys, time, torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
time.sleep(float(sys.argv[1]))
""",
    # torch after a matmul: cuBLAS's handle and workspace too.
    "torch_after_matmul": r"""
import sys, time, torch
a = torch.randn(256, 256, device="cuda"); (a @ a).sum().item()
time.sleep(float(sys.argv[1]))
""",
}


def start_probes(args):
    probes = {}
    for name, code in CONTEXT_PROBES.items():
        try:
            probes[name] = subprocess.Popen(
                [args.python, "-c", code, "15"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            pass
    return probes


def end_probes(probes, smi):
    costs = {}
    for name, probe in probes.items():
        try:
            probe.wait(timeout=30)
        except subprocess.TimeoutExpired:
            probe.kill()
            probe.wait()
        costs[name] = {
            "pid": probe.pid,
            "exit_status": exit_status(probe.returncode),
            "nvidia_smi_peak_mib": smi.peaks_of([probe.pid]).get(str(probe.pid)),
        }
    return costs


# ---------------------------------------------------------------------------
# Totals, results file, table


def totals(records, cases, started, args):
    by_kind = {kind: [r for r in records if r["kind"] == kind] for kind in ("finding", "control", "error")}
    workers = []
    for r in by_kind["finding"]:
        if any(f["kind"] == "worker_context" for f in r["expected"]["findings"]):
            for m in r.get("device_memory") or []:
                if m["key"] == "dataloader_worker" and isinstance(m.get("nvidia_smi_peak_mib"), (int, float)):
                    workers.append(m)
    report_context = [
        m["report_context_and_modules_mib"]
        for m in workers
        if isinstance(m.get("report_context_and_modules_mib"), (int, float))
    ]
    return {
        "cases": len(records),
        "passed": sum(1 for r in records if r["pass"]),
        "failed": [r["case"] for r in records if not r["pass"]],
        "not_finished": [case_id(c) for c in cases if case_id(c) not in {r["case"] for r in records}],
        "finding_cases": len(by_kind["finding"]),
        "finding_cases_passed": sum(1 for r in by_kind["finding"] if r["pass"]),
        "finding_cases_with_right_findings": sum(1 for r in by_kind["finding"] if r["checks"].get("findings")),
        "controls": len(by_kind["control"]),
        "controls_passed": sum(1 for r in by_kind["control"] if r["pass"]),
        "controls_with_no_finding": sum(1 for r in by_kind["control"] if r["checks"].get("findings")),
        "controls_with_a_finding": [r["case"] for r in by_kind["control"] if not r["checks"].get("findings")],
        "error_cases": len(by_kind["error"]),
        "error_cases_passed": sum(1 for r in by_kind["error"] if r["pass"]),
        "checks": {
            check: {
                "passed": sum(1 for r in records if r["checks"].get(check) is True),
                "applicable": sum(1 for r in records if r["checks"].get(check) is not None),
            }
            for check in CHECKS
        },
        "context_size": {
            "what": "nvidia-smi's peak per process of the DataLoader workers of the worker_context cases "
            "(a context with the few kernels a Dataset's .cuda() loads), and the report's "
            "'CUDA context and modules' for the same processes",
            "workers": len(workers),
            "median_nvidia_smi_peak_mib": statistics.median([m["nvidia_smi_peak_mib"] for m in workers])
            if workers
            else None,
            "median_report_context_and_modules_mib": statistics.median(report_context) if report_context else None,
            "per_case": {
                r["case"]: [
                    m.get("nvidia_smi_peak_mib")
                    for m in r.get("device_memory") or []
                    if m["key"] == "dataloader_worker"
                ]
                for r in by_kind["finding"]
                if any(f["kind"] == "worker_context" for f in r["expected"]["findings"])
            },
        },
        "doctor": {
            r["case"]: {
                "listed": (r["doctor"] or {}).get("truth_pids_listed"),
                "not_listed": (r["doctor"] or {}).get("truth_pids_not_listed"),
                "snapshots": (r["doctor"] or {}).get("snapshots"),
            }
            for r in records
            if r.get("doctor") is not None
        },
        "wall_s": round(time.monotonic() - started, 1),
        "jobs": args.jobs,
    }


def write_json(path, value):
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2)
        handle.write("\n")
    os.replace(path + ".tmp", path)


def first_reason(record):
    for check in CHECKS:
        if record["checks"].get(check) is False:
            return "%s: %s" % (check, "; ".join(record["why"].get(check) or ["failed"]))
    return record.get("error") or ""


def print_table(records, summary, out=sys.stdout):
    marks = {True: "ok", False: "FAIL", None: "-"}
    short = ("exit", "roles", "find", "init", "line", "mem")
    header = "%-42s %-8s %5s " % ("case", "kind", "exit") + " ".join("%-5s" % s for s in short) + "  result"
    out.write(header + "\n" + "-" * len(header) + "\n")
    for r in records:
        out.write(
            "%-42s %-8s %5s " % (r["case"][:42], r["kind"], r["exit_status"])
            + " ".join("%-5s" % marks[r["checks"].get(c)] for c in CHECKS)
            + "  "
            + ("PASS" if r["pass"] else "FAIL " + first_reason(r))[:110]
            + "\n"
        )
    context = summary["context_size"]
    out.write(
        "\n%d/%d cases pass; finding cases %d/%d; controls with no finding %d/%d; error cases %d/%d;"
        " checks: %s; worker context median %s MiB (nvidia-smi, %d workers); %.0f s\n"
        % (
            summary["passed"],
            summary["cases"],
            summary["finding_cases_passed"],
            summary["finding_cases"],
            summary["controls_with_no_finding"],
            summary["controls"],
            summary["error_cases_passed"],
            summary["error_cases"],
            ", ".join("%s %d/%d" % (c, v["passed"], v["applicable"]) for c, v in summary["checks"].items()),
            context["median_nvidia_smi_peak_mib"],
            context["workers"],
            summary["wall_s"],
        )
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", help="the gpuleak binary (required unless --rescore)")
    parser.add_argument("--out", required=True, help="folder for the cases' files and process-corpus.json")
    parser.add_argument("--corpus", default=CORPUS_JSON, help="the labels (default examples/processes/corpus.json)")
    parser.add_argument("--python", default="python3", help="the Python that runs the scripts (default python3)")
    parser.add_argument("--timeout", type=float, default=100.0, help="seconds per case before it is killed")
    parser.add_argument("--jobs", type=int, default=4, help="cases at a time (default 4)")
    parser.add_argument("--only", nargs="+", metavar="CASE", help="run only these cases (script names, .py optional)")
    parser.add_argument(
        "--keep-traces",
        nargs="*",
        default=list(DEFAULT_KEEP_TRACES),
        metavar="CASE",
        help="cases whose traces stay in <out>/<case>/traces (default: %s)" % " ".join(DEFAULT_KEEP_TRACES),
    )
    parser.add_argument(
        "--no-context-probes", action="store_true", help="do not measure a lone context's cost (context_cost)"
    )
    parser.add_argument(
        "--rescore",
        metavar="DIR",
        help="run no program: score DIR/<case>/ of an earlier run (with --gpuleak, "
        "the report made again from DIR/<case>/traces)",
    )
    args = parser.parse_args(argv)
    if not args.rescore and not args.gpuleak:
        parser.error("--gpuleak is required (or --rescore DIR)")
    if args.gpuleak:
        args.gpuleak = os.path.abspath(args.gpuleak)
        if not os.access(args.gpuleak, os.X_OK):
            parser.error("%s is not an executable" % args.gpuleak)
    if args.rescore:
        args.rescore = os.path.abspath(args.rescore)
        if not os.path.isdir(args.rescore):
            parser.error("%s is not a folder" % args.rescore)
    if args.timeout <= 0 or args.jobs < 1:
        parser.error("--timeout and --jobs must be positive")
    args.out = os.path.abspath(args.out)
    args.keep_traces = {os.path.splitext(name)[0] for name in args.keep_traces}
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    corpus, error = load_json(args.corpus, "corpus")
    if not isinstance(corpus, dict) or not isinstance(corpus.get("cases"), list):
        sys.stderr.write("cannot read the corpus: %s\n" % (error or "no 'cases' list"))
        return 2
    cases = corpus["cases"]
    if args.only:
        wanted = {os.path.splitext(name)[0] for name in args.only}
        unknown = wanted - {case_id(c) for c in cases}
        if unknown:
            sys.stderr.write("not in the corpus: %s\n" % ", ".join(sorted(unknown)))
            return 2
        cases = [c for c in cases if case_id(c) in wanted]
    if args.rescore:
        cases = [c for c in cases if os.path.isdir(os.path.join(args.rescore, case_id(c)))]
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    smi = SmiPeaks()
    samplers = (
        []
        if args.rescore
        else [
            Sampler(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                SMI_INTERVAL_S,
                smi.keep,
            )
        ]
    )
    for sampler in samplers:
        sampler.start()
    probes = {} if args.rescore or args.no_context_probes else start_probes(args)
    records, context_cost = {}, None
    lock = threading.RLock()  # the SIGTERM handler may write while the main thread is writing

    def write_results(complete):
        """Writes process-corpus.json; also after each case, so a run cut short keeps what it finished."""
        with lock:
            ordered = [records[case_id(c)] for c in cases if case_id(c) in records]
            summary = totals(ordered, cases, started, args)
            summary["nvidia_smi_samples"] = smi.samples
            summary["context_cost"] = context_cost
            write_json(
                os.path.join(args.out, "process-corpus.json"),
                {
                    "schema": SCHEMA,
                    "complete": complete,
                    "command": [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)] + argv,
                    "mode": "rescore" if args.rescore else "gpuleak",
                    "corpus": os.path.relpath(args.corpus, REPO),
                    "checks": {
                        "exit_status": "the program's exit status under gpuleak run",
                        "roles": "every truth pid has the labelled role in job.processes",
                        "findings": "job.findings' kinds equal the labelled kinds, each naming exactly the "
                        "truth key's pids; none at all when the label is empty",
                        "cuda_init": "cuda_first_use.site is a `# CUDA-INIT` line of the script, in the "
                        "labelled function (a suffix of site.function)",
                        "summary_line_only": "gpu_work false and no section in the text report",
                        "context_memory": "device_memory.peak_used_bytes within 10 % of nvidia-smi's peak "
                        "for the pid",
                    },
                    "totals": summary,
                    "cases": ordered,
                },
            )
            return ordered, summary

    def on_sigterm(_signum, _frame):
        """Cut short (the suite's timeout): end every running case's processes; keep what finished."""
        for session in list(RUNNING_SESSIONS):
            for pid in session_members(session):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for probe in probes.values():
            probe.kill()
        write_results(complete=False)
        sys.stderr.write("process_corpus: ended by SIGTERM; %d cases finished\n" % len(records))
        os._exit(124)

    signal.signal(signal.SIGTERM, on_sigterm)

    # Longest cases first (their children live for a set time), so a small --jobs still ends soon.
    def expected_seconds(case):
        values = case.get("args", [])
        return max([float(v) for k, v in zip(values, values[1:]) if k.endswith("-seconds")] or [0.0])

    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {
                pool.submit(case_record, args, case, smi): case
                for case in sorted(cases, key=expected_seconds, reverse=True)
            }
            for future in concurrent.futures.as_completed(futures):
                case = futures[future]
                records[case_id(case)] = future.result()
                sys.stderr.write(
                    "%-42s %s\n"
                    % (
                        case_id(case),
                        "pass"
                        if records[case_id(case)]["pass"]
                        else "FAIL " + first_reason(records[case_id(case)])[:100],
                    )
                )
                write_results(complete=False)
    finally:
        if probes:
            context_cost = end_probes(probes, smi)
        for sampler in samplers:
            sampler.stop()
    ordered, summary = write_results(complete=True)
    print_table(ordered, summary)
    return 0 if ordered and summary["passed"] == summary["cases"] == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
