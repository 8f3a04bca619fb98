#!/usr/bin/env python3
"""Runs the depth corpus (examples/depth/, issue 37) under `gpuleak run` on a GPU and scores what the reports say.

The corpus is leak/control pairs from public reports for what a report must
say beyond the verdict. For every case of examples/depth/corpus.json it runs

    <gpuleak> run -o <out>/<case> --json-report <out>/<case>/report.json -- <program> --steps N

(<program> is `python3 examples/depth/<case>.py`, or the binary built from the
.cu case into --cuda-bin / --build-cuda), up to --jobs cases at a time, each in
its own process group, killed at its time limit. A case with `prepare` (the
PyTorch extension, `--build-only`) first runs the program plainly with those
arguments, so the timed run does not compile. It reads report.json (schema
gpuleak-report/1, docs/json-schema.md), picks the process that runs the
program, and scores per case:

  verdict          a leak gets LEAK; a control never gets LEAK (final verdict and verdict_step; whether
                   it reached NO LEAK or stayed NOT YET is recorded)
  keeping_line     the statement that keeps the memory is named within 1 line of the label's keep_line
                   (or caller_line): for keep_via "holder", as a holder's keeping statement -- any
                   `kept_at` {file, line} in the process (growth.holder.holder.kept_at,
                   leaks.groups[].holder...); for keep_via "site", as an allocation or creation site too
                   (growth.sites[].site, leaks.groups[].site, any `created_at`)
  no_wrong_advice  none of expected.must_not_contain is in the report's words (for C++ allocations: no
                   Python advice such as ".item()", "detach", "Python reference")
  library_api      library cases: the creating API (or an alternative) and its destroy call are in the words
  view             view cases: "view" and ".clone()" are in the words
  words            every group of expected.must_contain has a word in the words (library fixes, views)
  steps_needed     slow, late and rare leaks: LEAK, and the steps it needed are recorded (steps_to_verdict,
                   first_growing_step against leak_start_step)

"The report's words" are every string of the picked process's JSON except its
stacks and source text (keys frames, source_line, stack_ids, sample_blocks,
timeline, command_line, executable, trace, hostname), so a function name that
only appears in a stack frame, or the text of the marked line itself, does not
count as the report naming it. Checks that do not apply to a case are null. A
case passes when every check that applies passes.

It writes <out>/depth-corpus.json (every case: the command, the environment,
what was expected, what gpuleak said, each check; totals per check) and prints
a table. Exit 0 when every gated case passes, 1 otherwise, 2 for bad arguments.

    python3 tests/gpu/depth_corpus.py --gpuleak dist/gpuleak --out /tmp/depth            # .py cases only
    python3 tests/gpu/depth_corpus.py --gpuleak dist/gpuleak --build-cuda /tmp/depth-bin --out /tmp/depth
    python3 tests/gpu/depth_corpus.py --list                                            # the cases (no GPU)
    python3 tests/gpu/depth_corpus.py --dry-run --out /tmp/depth --cuda-bin BIN         # the commands (no GPU)
    python3 tests/gpu/depth_corpus.py --plain --build-cuda BIN --out /tmp/depth-plain   # programs alone

Standard library only (Python 3.8+); run from anywhere, paths resolve from this file.
"""
import argparse
import concurrent.futures
import glob
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(REPO, "examples", "depth")
# examples/depth/labels.py, loaded under its own name: examples/loops/labels.py is also "labels".
_spec = importlib.util.spec_from_file_location("depth_labels", os.path.join(EXAMPLES, "labels.py"))
labels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(labels)
sys.path.insert(0, HERE)
import corpus_runs  # noqa: E402  (tests/gpu/corpus_runs.py: running one case)
from corpus_reports import growth_of, holder_of, load_report, pick_process  # noqa: E402

SCHEMA = "gpuleak-depth-corpus-results/1"
CHECKS = ("verdict", "keeping_line", "no_wrong_advice", "library_api", "view", "words", "steps_needed")
# Parts of a process's JSON that are not the report's words: stacks, source text, identity, series.
NOT_WORDS = {
    "frames",
    "source_line",
    "stack_ids",
    "sample_blocks",
    "timeline",
    "command_line",
    "executable",
    "trace",
    "hostname",
}
NVCC_FLAGS = ["-g", "-O1", "-std=c++17", "-arch=sm_90"]


# ---------------------------------------------------------------------------
# Reading a report


def program_name(case):
    """What the traced process's command line holds: the script, or the binary built from the .cu."""
    program = case["program"]
    return os.path.splitext(program)[0] if program.endswith(".cu") else program


def report_words(process):
    """Every string of the process's JSON outside stacks and source text, joined, lower-cased."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key not in NOT_WORDS:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            found.append(value)

    walk(process)
    return "\n".join(found).lower()


def located_lines(process):
    """[(path of keys, file, line)] of every {file, line} object in the process outside stacks."""
    found = []

    def walk(value, path):
        if isinstance(value, dict):
            if isinstance(value.get("line"), int) and value.get("file"):
                found.append(("/".join(path), str(value["file"]), value["line"]))
            for key, item in value.items():
                if key != "frames":
                    walk(item, path + [str(key)])
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, path + [str(index)])

    walk(process, [])
    return found


def keeping_candidates(process, keep_via):
    """The {file, line} objects that count as naming a keeping statement for the case's keep_via."""
    candidates = []
    for path, file_name, line in located_lines(process):
        keys = path.split("/")
        holder_like = "kept_at" in keys or "keeping" in path or "caller" in path
        site_like = any(key in ("site", "created_at", "creation_site", "creating_site") for key in keys)
        if holder_like or (keep_via == "site" and site_like):
            candidates.append({"path": path, "file": file_name, "line": line})
    return candidates


def matches_label(candidate, label):
    if not label:
        return False
    file_name, line = label.rsplit(":", 1)
    return (
        os.path.basename(candidate["file"]) == os.path.basename(file_name) and abs(candidate["line"] - int(line)) <= 1
    )


def word_present(words, word):
    return word.lower() in words


# ---------------------------------------------------------------------------
# Scoring one case


def score_case(case, report, report_error):
    expected = case["expected"]
    is_leak = case["kind"] == "leak"
    record = {
        "expected": {
            "verdict": expected["verdict"],
            "keep_line": expected.get("keep_line"),
            "caller_line": expected.get("caller_line"),
            "keep_via": expected.get("keep_via"),
            "creating_api": expected.get("creating_api"),
            "destroy_call": expected.get("destroy_call"),
            "view": expected.get("view"),
            "must_contain": expected.get("must_contain"),
            "must_not_contain": expected.get("must_not_contain"),
            "holder_hint": expected.get("holder_hint"),
            "cause": expected.get("cause"),
            "bytes_per_step": case.get("bytes_per_step"),
            "leak_start_step": case.get("leak_start_step"),
            "period_steps": case.get("period_steps"),
        },
        "got": None,
        "checks": {},
        "error": report_error,
    }
    process = pick_process(report, program_name(case)) if report else None
    if report and process is None:
        record["error"] = "no process in the report runs %s (%d processes)" % (
            program_name(case),
            len(report["processes"]),
        )
    applicable = applicable_checks(case)
    if process is None:
        record["checks"] = {check: (False if check in applicable else None) for check in CHECKS}
        record["pass"] = False
        return record
    growth = growth_of(process)
    holder, holder_kind = holder_of(growth)
    words = report_words(process)
    steps, warmup, verdict_step = growth.get("steps"), growth.get("warmup_steps"), growth.get("verdict_step")
    steps_to_verdict = verdict_step - warmup if isinstance(verdict_step, int) and isinstance(warmup, int) else None
    candidates = keeping_candidates(process, expected.get("keep_via", "holder"))
    keep_hits = [c for c in candidates if matches_label(c, expected.get("keep_line"))]
    caller_hits = [c for c in candidates if matches_label(c, expected.get("caller_line"))]
    sites = growth.get("sites") if isinstance(growth.get("sites"), list) else []
    top = sites[0] if sites and isinstance(sites[0], dict) else {}
    location = top.get("site") if isinstance(top.get("site"), dict) else {}
    got = {
        "verdict": growth.get("verdict"),
        "process_verdict": (process.get("verdict") or {}).get("name")
        if isinstance(process.get("verdict"), dict)
        else None,
        "step_source": growth.get("step_source"),
        "steps": steps,
        "warmup_steps": warmup,
        "verdict_step": verdict_step,
        "steps_to_verdict": steps_to_verdict,
        "first_growing_step": growth.get("first_growing_step"),
        "rate_bytes_per_step": growth.get("rate_bytes_per_step"),
        "cause": growth.get("cause"),
        "cause_text": growth.get("cause_text"),
        "fix": growth.get("fix"),
        "note": growth.get("note"),
        "holder": holder,
        "holder_kind": holder_kind,
        "top_site": "%s:%s %s"
        % (os.path.basename(str(location.get("file"))), location.get("line"), location.get("function") or "")
        if location
        else None,
        "keeping_candidates": candidates[:20],
        "keep_line_named": bool(keep_hits),
        "caller_line_named": bool(caller_hits),
        "words_found": {},
        "words_forbidden_found": [],
        "duration_s": process.get("duration_s"),
        "pid": process.get("pid"),
        "processes_in_report": len(report["processes"]),
        "torch_tracking": process.get("torch_tracking"),
        "events": process.get("events"),
    }
    record["got"] = got
    checks = {check: None for check in CHECKS}
    record["verdict_matches"] = got["verdict"] == expected["verdict"]
    if is_leak:
        checks["verdict"] = got["verdict"] == "LEAK"
    else:
        checks["verdict"] = got["verdict"] != "LEAK" and verdict_step is None
    if "keeping_line" in applicable:
        checks["keeping_line"] = bool(keep_hits or caller_hits)
    forbidden = [w for w in expected.get("must_not_contain") or [] if word_present(words, w)]
    got["words_forbidden_found"] = forbidden
    if "no_wrong_advice" in applicable:
        checks["no_wrong_advice"] = not forbidden
    if "library_api" in applicable:
        creating = [expected["creating_api"]] + list(expected.get("creating_api_alternatives") or [])
        destroying = [expected["destroy_call"]] + list(expected.get("destroy_call_alternatives") or [])
        got["words_found"]["creating_api"] = [w for w in creating if word_present(words, w)]
        got["words_found"]["destroy_call"] = [w for w in destroying if word_present(words, w)]
        checks["library_api"] = bool(got["words_found"]["creating_api"] and got["words_found"]["destroy_call"])
    if "view" in applicable:
        got["words_found"]["view"] = [w for w in ("view", ".clone()") if word_present(words, w)]
        checks["view"] = len(got["words_found"]["view"]) == 2
    if "words" in applicable:
        groups = expected.get("must_contain") or []
        got["words_found"]["must_contain"] = [[w for w in group if word_present(words, w)] for group in groups]
        checks["words"] = all(got["words_found"]["must_contain"])
    if "steps_needed" in applicable:
        checks["steps_needed"] = got["verdict"] == "LEAK" and steps_to_verdict is not None
        start = case.get("leak_start_step")
        first = got["first_growing_step"]
        record["late_start_seen"] = (isinstance(first, int) and first >= start - 5) if start else None
    causes = [expected.get("cause")] + list(expected.get("cause_alternatives") or [])
    record["cause_matches"] = got["cause"] in causes if expected.get("cause") else None
    record["checks"] = checks
    record["pass"] = all(value is not False for value in checks.values())
    return record


def applicable_checks(case):
    """The checks that apply to the case (the others are null in its record)."""
    expected = case["expected"]
    found = {"verdict"}
    if case["kind"] != "leak":
        return found
    if expected.get("keep_line"):
        found.add("keeping_line")
    if expected.get("must_not_contain"):
        found.add("no_wrong_advice")
    if expected.get("creating_api"):
        found.add("library_api")
    if expected.get("view"):
        found.add("view")
    if expected.get("must_contain"):
        found.add("words")
    if expected.get("report_steps_needed"):
        found.add("steps_needed")
    return found


# ---------------------------------------------------------------------------
# Building the .cu cases


def cudnn_flags(python):
    """nvcc flags that find cuDNN: the CUDA toolkit's copy, else the nvidia-cudnn wheel PyTorch brings."""
    cuda_home = os.environ.get("CUDA_HOME") or os.path.dirname(
        os.path.dirname(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    )
    for include in (os.path.join(cuda_home, "include"), "/usr/include", "/usr/include/x86_64-linux-gnu"):
        if os.path.exists(os.path.join(include, "cudnn.h")):
            return ["-I" + include, "-lcudnn"]
    try:
        folder = subprocess.run(
            [python, "-c", "import nvidia.cudnn as m; print(list(m.__path__)[0])"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        folder = ""
    if folder and os.path.exists(os.path.join(folder, "include", "cudnn.h")):
        libraries = sorted(glob.glob(os.path.join(folder, "lib", "libcudnn.so*")))
        name = os.path.basename(libraries[0]) if libraries else "libcudnn.so.9"
        return [
            "-I" + os.path.join(folder, "include"),
            "-L" + os.path.join(folder, "lib"),
            "-l:" + name,
            "-Xlinker",
            "-rpath=" + os.path.join(folder, "lib"),
        ]
    return ["-lcudnn"]


def build_command(case, bin_dir, python, nvcc="nvcc", resolve=True):
    libraries = []
    for flag in case.get("nvcc_libs") or []:
        if flag == "{cudnn}":
            libraries += cudnn_flags(python) if resolve else ["{cudnn}"]
        else:
            libraries.append(flag)
    return (
        [nvcc]
        + NVCC_FLAGS
        + ["-o", os.path.join(bin_dir, program_name(case)), os.path.join(EXAMPLES, case["program"])]
        + libraries
    )


def build_cuda(args, cases):
    """Builds every .cu case into args.build_cuda, several at a time; returns {case id: error or None}."""
    os.makedirs(args.build_cuda, exist_ok=True)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    results = {}

    def build(case):
        command = build_command(case, args.build_cuda, args.python, nvcc)
        log_path = os.path.join(args.build_cuda, program_name(case) + ".nvcc.log")
        rc, _, timed_out = corpus_runs.run_command(command, log_path, 300, dict(os.environ), REPO)
        return case["id"], None if rc == 0 else "nvcc exit %s%s (see %s)" % (
            rc,
            ", timed out" if timed_out else "",
            log_path,
        )

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for case_id, error in pool.map(build, [c for c in cases if c["program"].endswith(".cu")]):
            results[case_id] = error
            if error:
                sys.stderr.write("build %s: %s\n" % (case_id, error))
    return results


# ---------------------------------------------------------------------------
# Running


def case_environment(args, case):
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env["DEPTH_EXT_BUILD"] = args.ext_build
    env.update(case.get("env", {}))
    return env


def program_command(args, case, extra=None):
    if case["program"].endswith(".cu"):
        program = [os.path.join(args.cuda_bin or "CUDA_BIN", program_name(case))]
    else:
        program = [args.python, os.path.join("examples", "depth", case["program"])]
    if extra is not None:
        return program + list(extra)
    return program + ["--steps", str(case["steps"])]


def case_command(args, case, case_dir):
    program = program_command(args, case)
    if args.plain:
        return program
    return (
        [args.gpuleak or "gpuleak", "run", "-o", case_dir, "--json-report", os.path.join(case_dir, "report.json")]
        + list(args.run_arg)
        + ["--"]
        + program
    )


def case_timeout(args, case):
    return max(args.timeout, int(case.get("timeout_s") or 0))


def last_line(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip().startswith("steps=")]
        return lines[-1] if lines else None
    except OSError:
        return None


def run_case(args, case, build_errors):
    case_dir = os.path.join(args.out, case["id"])
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)  # gpuleak refuses a folder with traces of an earlier run
    os.makedirs(case_dir)
    env = case_environment(args, case)
    base = {
        "case": case["id"],
        "program": case["program"],
        "kind": case["kind"],
        "pair": case["pair"],
        "language": case["language"],
        "covers": case["covers"],
        "library": case.get("library"),
        "gate": case.get("gate", True),
        "steps_passed": case["steps"],
        "sources": case.get("sources"),
    }
    if build_errors.get(case["id"]):
        record = {
            "expected": {"verdict": case["expected"]["verdict"]},
            "got": None,
            "pass": False,
            "checks": {check: (False if check in applicable_checks(case) else None) for check in CHECKS},
            "error": "not built: " + build_errors[case["id"]],
        }
        record.update(base)
        record.update({"command": None, "exit_status": None, "timed_out": False, "wall_s": 0.0})
        return record
    prepare = None
    if case.get("prepare"):
        command = program_command(args, case, case["prepare"])
        log_path = os.path.join(args.out, "logs", case["id"] + ".prepare.log")
        rc, wall_s, timed_out = corpus_runs.run_command(command, log_path, case_timeout(args, case), env, REPO)
        prepare = {"command": command, "exit_status": rc, "wall_s": wall_s, "timed_out": timed_out}
    command = case_command(args, case, case_dir)
    log_path = os.path.join(args.out, "logs", case["id"] + ".log")
    rc, wall_s, timed_out = corpus_runs.run_command(command, log_path, case_timeout(args, case), env, REPO)
    if args.plain:
        record = {
            "expected": {"verdict": case["expected"]["verdict"]},
            "got": None,
            "checks": {},
            "error": None if rc == 0 else "exit status %s" % rc,
            "pass": rc == 0,
        }
    else:
        report, error = load_report(os.path.join(case_dir, "report.json"))
        try:
            record = score_case(case, report, error)
        except Exception as failure:  # a report of an unexpected shape must not stop the run
            record = {
                "expected": {"verdict": case["expected"]["verdict"]},
                "got": None,
                "pass": False,
                "checks": {check: (False if check in applicable_checks(case) else None) for check in CHECKS},
                "error": "could not score the report: %s: %s" % (type(failure).__name__, failure),
            }
        if rc != 0 and record.get("error") is None:
            record["error"] = "exit status %s" % rc
    if timed_out:
        record["error"] = "timed out after %d s; %s" % (case_timeout(args, case), record.get("error") or "")
        record["pass"] = False
    record.update(base)
    record.update(
        {
            "command": command,
            "env": case.get("env", {}),
            "prepare": prepare,
            "exit_status": rc,
            "timed_out": timed_out,
            "wall_s": wall_s,
            "program_output": last_line(log_path),
            "log": os.path.relpath(log_path, args.out),
        }
    )
    if not args.keep_traces:
        for path in glob.glob(os.path.join(case_dir, "*.trace")):
            if os.path.getsize(path) > 1 << 20:
                os.unlink(path)
    return record


def totals(records, started, args, skipped, build_errors):
    gated = [r for r in records if r["gate"]]
    leaks = [r for r in gated if r["kind"] == "leak"]
    controls = [r for r in gated if r["kind"] == "control"]

    def got(record, field):
        return (record.get("got") or {}).get(field)

    summary = {
        "cases": len(records),
        "gated_cases": len(gated),
        "passed": sum(1 for r in gated if r["pass"]),
        "failed": [r["case"] for r in gated if not r["pass"]],
        "skipped_without_cuda_bin": skipped,
        "build_errors": {k: v for k, v in build_errors.items() if v},
        "wall_s": round(time.monotonic() - started, 1),
        "jobs": args.jobs,
    }
    if not args.plain:
        per_check = {}
        for check in CHECKS:
            values = [r["checks"].get(check) for r in gated if r["checks"].get(check) is not None]
            per_check[check] = {"passed": sum(1 for v in values if v), "applicable": len(values)}
        with_keep = [r for r in leaks if r["checks"].get("keeping_line") is not None]
        summary.update(
            {
                "checks": per_check,
                "leaks": len(leaks),
                "leaks_with_leak_verdict": sum(1 for r in leaks if got(r, "verdict") == "LEAK"),
                "controls": len(controls),
                "controls_with_leak": [
                    r["case"] for r in controls if got(r, "verdict") == "LEAK" or got(r, "verdict_step") is not None
                ],
                "controls_with_no_leak_verdict": sum(1 for r in controls if got(r, "verdict") == "NO LEAK"),
                "keeping_line_rate": round(sum(1 for r in with_keep if r["checks"]["keeping_line"]) / len(with_keep), 3)
                if with_keep
                else None,
                "keeping_line_goal": 0.95,
                "cpp_cases_without_python_advice": "%d/%d"
                % (
                    sum(1 for r in leaks if r["language"] == "cpp" and r["checks"].get("no_wrong_advice")),
                    sum(1 for r in leaks if r["language"] == "cpp"),
                ),
                "steps_needed": {
                    r["case"]: {
                        "verdict": got(r, "verdict"),
                        "steps": got(r, "steps"),
                        "warmup_steps": got(r, "warmup_steps"),
                        "verdict_step": got(r, "verdict_step"),
                        "steps_to_verdict": got(r, "steps_to_verdict"),
                        "first_growing_step": got(r, "first_growing_step"),
                        "step_source": got(r, "step_source"),
                    }
                    for r in leaks
                    if r["checks"].get("steps_needed") is not None
                },
                "verdicts": {
                    v: sum(1 for r in records if str(got(r, "verdict")) == v)
                    for v in sorted({str(got(r, "verdict")) for r in records})
                },
            }
        )
    return summary


def mark(value):
    return "-" if value is None else ("ok" if value else "FAIL")


def print_table(records, summary, plain, out=sys.stdout):
    if plain:
        header = "%-42s %-8s %5s %7s  %s" % ("case", "kind", "exit", "wall_s", "program output")
        out.write(header + "\n" + "-" * len(header) + "\n")
        for r in records:
            out.write(
                "%-42s %-8s %5s %7.1f  %s\n"
                % (
                    r["case"][:42],
                    r["kind"],
                    r["exit_status"],
                    r["wall_s"] or 0,
                    (r.get("program_output") or r.get("error") or "")[:70],
                )
            )
        out.write(
            "\n%d/%d programs ran and exited 0; %.0f s\n"
            % (summary["passed"], summary["gated_cases"], summary["wall_s"])
        )
        return
    header = "%-40s %-7s %-8s %-5s %-5s %-5s %-5s %-5s %-5s %-5s %6s %6s  %s" % (
        "case",
        "expect",
        "got",
        "verd",
        "keep",
        "advic",
        "api",
        "view",
        "words",
        "steps",
        "to_vrd",
        "wall_s",
        "result",
    )
    out.write(header + "\n" + "-" * len(header) + "\n")
    for r in records:
        got = r.get("got") or {}
        checks = r.get("checks") or {}
        result = (
            "PASS"
            if r["pass"]
            else "FAIL " + (r.get("error") or ",".join(check for check, value in checks.items() if value is False))
        )
        out.write(
            "%-40s %-7s %-8s %-5s %-5s %-5s %-5s %-5s %-5s %-5s %6s %6.1f  %s\n"
            % (
                r["case"][:40],
                r["expected"]["verdict"],
                str(got.get("verdict") or "-")[:8],
                mark(checks.get("verdict")),
                mark(checks.get("keeping_line")),
                mark(checks.get("no_wrong_advice")),
                mark(checks.get("library_api")),
                mark(checks.get("view")),
                mark(checks.get("words")),
                mark(checks.get("steps_needed")),
                "-" if got.get("steps_to_verdict") is None else got["steps_to_verdict"],
                r.get("wall_s") or 0,
                result[:70],
            )
        )
    per_check = summary["checks"]
    out.write(
        "\n%d/%d gated cases pass; %s; keeping line %s of leaks (goal %.0f %%); controls with LEAK: %s; "
        "C++ leaks without Python advice %s; %.0f s\n"
        % (
            summary["passed"],
            summary["gated_cases"],
            ", ".join(
                "%s %d/%d" % (check, value["passed"], value["applicable"])
                for check, value in per_check.items()
                if value["applicable"]
            ),
            "-" if summary["keeping_line_rate"] is None else "%.0f %%" % (100 * summary["keeping_line_rate"]),
            100 * summary["keeping_line_goal"],
            ", ".join(summary["controls_with_leak"]) or "none",
            summary["cpp_cases_without_python_advice"],
            summary["wall_s"],
        )
    )


def list_cases(cases, out=sys.stdout):
    header = "%-40s %-7s %-6s %-8s %-28s %5s %s" % (
        "case",
        "kind",
        "lang",
        "expect",
        "covers",
        "steps",
        "keep line / creating API",
    )
    out.write(header + "\n" + "-" * len(header) + "\n")
    for case in cases:
        expected = case["expected"]
        detail = expected.get("keep_line") or "-"
        if expected.get("creating_api"):
            detail += "  %s / %s" % (expected["creating_api"], expected["destroy_call"])
        out.write(
            "%-40s %-7s %-6s %-8s %-28s %5d %s\n"
            % (
                case["id"][:40],
                case["kind"],
                case["language"],
                expected["verdict"],
                case["covers"][:28],
                case["steps"],
                detail,
            )
        )
    out.write(
        "\n%d cases (%d leaks, %d controls)\n"
        % (len(cases), sum(1 for c in cases if c["kind"] == "leak"), sum(1 for c in cases if c["kind"] == "control"))
    )


def dry_run(args, cases, out=sys.stdout):
    for case in cases:
        case_dir = os.path.join(args.out, case["id"])
        out.write("# %s (%s, %s)\n" % (case["id"], case["kind"], case["expected"]["verdict"]))
        if case["program"].endswith(".cu"):
            out.write(
                "  build: %s\n"
                % " ".join(
                    shlex.quote(w)
                    for w in build_command(
                        case, args.cuda_bin or args.build_cuda or "CUDA_BIN", args.python, resolve=False
                    )
                )
            )
        if case.get("prepare"):
            out.write(
                "  prepare: %s\n" % " ".join(shlex.quote(w) for w in program_command(args, case, case["prepare"]))
            )
        out.write("  run: %s\n" % " ".join(shlex.quote(w) for w in case_command(args, case, case_dir)))
        out.write(
            "  checks: %s; timeout %d s\n"
            % (", ".join(c for c in CHECKS if c in applicable_checks(case)), case_timeout(args, case))
        )


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", help="the gpuleak binary (required unless --plain, --list or --dry-run)")
    parser.add_argument("--out", help="folder for traces, reports, logs and depth-corpus.json")
    parser.add_argument("--corpus", default=labels.CORPUS_JSON, help="the labels (default examples/depth/corpus.json)")
    parser.add_argument("--python", default="python3", help="the Python that runs the programs (default python3)")
    parser.add_argument("--cuda-bin", help="folder with the binaries built from the .cu cases")
    parser.add_argument(
        "--build-cuda", metavar="DIR", help="build the .cu cases with nvcc into DIR first (and use them)"
    )
    parser.add_argument("--ext-build", help="build folder of the PyTorch extension (default <out>/ext-build)")
    parser.add_argument("--jobs", type=int, default=6, help="cases at a time (default 6)")
    parser.add_argument(
        "--timeout",
        type=int,
        default=150,
        help="seconds per case before it is killed (default 150; " "a case's timeout_s raises it)",
    )
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these cases")
    parser.add_argument(
        "--run-arg", action="append", default=[], metavar="ARG", help="extra argument for `gpuleak run` (repeat)"
    )
    parser.add_argument("--plain", action="store_true", help="run the programs without gpuleak (exit 0 and time)")
    parser.add_argument("--keep-traces", action="store_true", help="keep traces over 1 MiB too")
    parser.add_argument("--list", action="store_true", help="list the cases and exit (no GPU needed)")
    parser.add_argument("--dry-run", action="store_true", help="print each case's commands and checks and exit")
    args = parser.parse_args(argv)
    if not (args.list or args.dry_run):
        if not args.out:
            parser.error("--out is required")
        if not args.plain and not args.gpuleak:
            parser.error("--gpuleak is required (or --plain, --list, --dry-run)")
    if args.gpuleak and not (args.list or args.dry_run):
        args.gpuleak = os.path.abspath(args.gpuleak)
        if not os.access(args.gpuleak, os.X_OK):
            parser.error("%s is not an executable" % args.gpuleak)
    args.out = os.path.abspath(args.out or os.path.join("/tmp", "depth"))
    if args.build_cuda:
        args.build_cuda = os.path.abspath(args.build_cuda)
        args.cuda_bin = args.build_cuda
    if args.cuda_bin:
        args.cuda_bin = os.path.abspath(args.cuda_bin)
    args.ext_build = os.path.abspath(args.ext_build or os.path.join(args.out, "ext-build"))
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    corpus = labels.load_corpus(args.corpus)
    cases = list(corpus["cases"])
    order = {case["id"]: index for index, case in enumerate(corpus["cases"])}
    problems = labels.problems(corpus)
    if problems:
        sys.stderr.write("corpus.json disagrees with the programs:\n  %s\n" % "\n  ".join(problems))
        return 2
    if args.only:
        unknown = set(args.only) - {c["id"] for c in cases}
        if unknown:
            sys.stderr.write("not in the corpus: %s\n" % ", ".join(sorted(unknown)))
            return 2
        cases = [c for c in cases if c["id"] in args.only]
    if args.list:
        list_cases(cases)
        return 0
    if args.dry_run:
        dry_run(args, cases)
        return 0
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    build_errors = build_cuda(args, cases) if args.build_cuda else {}
    skipped = []
    if not args.cuda_bin:
        skipped = [c["id"] for c in cases if c["program"].endswith(".cu")]
        cases = [c for c in cases if not c["program"].endswith(".cu")]
    started = time.monotonic()
    records = {}

    def write_results(complete):
        """Writes depth-corpus.json; also after each case, so a run cut short keeps what it finished."""
        ordered = [records[c["id"]] for c in cases if c["id"] in records]
        summary = totals(ordered, started, args, skipped, build_errors)
        summary["not_finished"] = [c["id"] for c in cases if c["id"] not in records]
        result = {
            "schema": SCHEMA,
            "complete": complete,
            "about": "the depth corpus (issue 37) under gpuleak run: per case the verdict, the keeping line "
            "within 1 line of the label, no wrong advice for the language, the creating API and its "
            "destroy call, views, the fix words, and the steps slow, late and rare leaks needed "
            "(tests/gpu/depth_corpus.py)",
            "command": [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)] + argv,
            "mode": "plain" if args.plain else "gpuleak",
            "corpus": os.path.relpath(args.corpus, REPO),
            "totals": summary,
            "cases": ordered,
        }
        path = os.path.join(args.out, "depth-corpus.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
            handle.write("\n")
        os.replace(path + ".tmp", path)
        return ordered, summary

    # The 20 GiB cases first, so they do not run beside each other at the end.
    cases.sort(key=lambda c: -(c.get("live_bytes") or 0))
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_case, args, case, build_errors): case for case in cases}
        for future in concurrent.futures.as_completed(futures):
            case = futures[future]
            records[case["id"]] = future.result()
            sys.stderr.write("%-42s %s\n" % (case["id"], "pass" if records[case["id"]]["pass"] else "FAIL"))
            write_results(complete=False)
    cases.sort(key=lambda c: order[c["id"]])
    ordered, summary = write_results(complete=True)
    print_table(ordered, summary, args.plain)
    return 0 if summary["passed"] == summary["gated_cases"] and not skipped else 1


if __name__ == "__main__":
    sys.exit(main())
