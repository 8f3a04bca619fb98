#!/usr/bin/env python3
"""Runs the loop corpus (examples/loops/) under `gpuleak run` on a GPU and scores the verdicts.

The corpus is loops that do not step a torch.optim optimizer (evaluation,
inference, serving, custom optimizers, JAX, CuPy, CUDA C++); issue 12 asks
for a leak verdict on each of them. For every case of examples/loops/corpus.json
it runs

    <gpuleak> run -o <out>/<case> --json-report <out>/<case>/report.json -- <program> --iterations N

(<program> is `python3 examples/loops/<case>.py`, or the binary that
--cuda-bin holds for a .cu case), with the case's environment, up to --jobs
cases at a time, each in its own process group and killed at --timeout. It
reads report.json (schema gpuleak-report/1, docs/json-schema.md), picks the
process that runs the program (not a child of another one that does), and
records per case:

  verdict, step_source, steps, warmup_steps, verdict_step
  steps_to_verdict       verdict_step - warmup_steps, in gpuleak's steps
  iterations_per_step    the case's --iterations / the steps gpuleak saw (1.0 when its steps are the
                         program's iterations; 40 when it saw 5 time windows in a 200-iteration run)
  iterations_to_verdict  steps_to_verdict x iterations_per_step: the program's iterations after warm-up
                         before the verdict, which is what the issue's limit counts
  top_site               the fastest growing site, and how it matches the marked LEAK: lines:
                         "exact", "function" (Python: in a marked line's function), "file", or "no"
  wall_s                 the run's wall time; duration_s, the traced process's time

A gated leak passes when it gets LEAK within --max-iterations-to-verdict (50)
iterations after warm-up; a control passes when it never gets LEAK (final
verdict and verdict_step) -- whether it reached NO LEAK or stayed NOT YET is
recorded (verdict_matches) and counted in the totals. Cases with "gate": false (a leak no driver-level
tool can see) are run, recorded and printed, but do not count. The traces of
every case stay in <out>/<case>/ (the GPU suite drops those over 1 MiB).

It writes <out>/loops-corpus.json (every case, the exact command and
environment of each run, totals) and prints a table. A missing or malformed
report fails that case and the run goes on. Exit status: 0 when every gated
case passes, 1 otherwise, 2 for bad arguments.

    python3 tests/gpu/loops_corpus.py --gpuleak build/gpuleak --cuda-bin /tmp/loops-bin --out /tmp/loops
    python3 tests/gpu/loops_corpus.py --plain --cuda-bin /tmp/loops-bin --out /tmp/loops-plain   # no gpuleak

--plain runs the programs alone: each must exit 0; its wall time is recorded.
Standard library only (Python 3.8+); run from anywhere, paths resolve from this file.
"""
import argparse
import ast
import concurrent.futures
import json
import os
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples", "loops")
sys.path.insert(0, EXAMPLES)
import labels  # noqa: E402  (examples/loops/labels.py)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_runs  # noqa: E402
from corpus_reports import growth_of, load_report, pick_process  # noqa: E402

SCHEMA = "gpuleak-loops-corpus-results/1"
CHECKS = ("verdict", "within_limit", "control_no_leak")


# ---------------------------------------------------------------------------
# Reading a report


def program_name(case):
    """What the traced process's command line holds: the script, or the binary built from the .cu."""
    program = case["program"]
    return os.path.splitext(program)[0] if program.endswith(".cu") else program


# ---------------------------------------------------------------------------
# Comparing with the labels


def function_ranges(path):
    """{name: (first, last)} of the functions and methods of a Python program; {} for others."""
    if not path.endswith(".py"):
        return {}
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    ranges = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ranges["%s:%d" % (node.name, node.lineno)] = (node.lineno, node.end_lineno)
    return ranges


def innermost(ranges, line):
    best = None
    for name, (first, last) in ranges.items():
        if first <= line <= last and (best is None or last - first < ranges[best][1] - ranges[best][0]):
            best = name
    return best


def site_location(site):
    if not isinstance(site, dict):
        return None, None, None
    location = site.get("site") if isinstance(site.get("site"), dict) else site
    return location.get("file"), location.get("line"), location.get("function")


def site_match(case, top_site):
    """'exact', 'function', 'file' or 'no' for the top growing site against the marked lines."""
    path, line, _ = site_location(top_site)
    if not path or os.path.basename(str(path)) != case["program"]:
        return "no"
    marked = [int(text.rsplit(":", 1)[1]) for text in case.get("marked_lines", [])]
    if isinstance(line, int) and line in marked:
        return "exact"
    ranges = function_ranges(os.path.join(EXAMPLES, case["program"]))
    if isinstance(line, int) and ranges:
        functions = {innermost(ranges, m) for m in marked} - {None}
        if innermost(ranges, line) in functions:
            return "function"
    return "file"


def site_text(top_site):
    path, line, function = site_location(top_site)
    if path is None:
        return None
    return "%s:%s %s" % (os.path.basename(str(path)), line, function or "")


def score_case(case, report, report_error, limit):
    """The per-case record: what was expected, what gpuleak said, and pass/fail per check."""
    is_leak = case["kind"] == "leak"
    record = {
        "expected": {
            "verdict": case["expected"]["verdict"],
            "cause": case["expected"].get("cause"),
            "marked_lines": case.get("marked_lines"),
            "bytes_per_iteration": case.get("bytes_per_iteration"),
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
    if process is None:
        record["checks"] = {check: False if applies(check, is_leak) else None for check in CHECKS}
        record["pass"] = False
        return record
    growth = growth_of(process)
    sites = growth.get("sites") if isinstance(growth.get("sites"), list) else []
    top_site = sites[0] if sites else None
    steps, warmup, verdict_step = growth.get("steps"), growth.get("warmup_steps"), growth.get("verdict_step")
    steps_to_verdict = verdict_step - warmup if isinstance(verdict_step, int) and isinstance(warmup, int) else None
    per_step = case["iterations"] / steps if isinstance(steps, int) and steps > 0 else None
    iterations_to_verdict = (
        round(steps_to_verdict * per_step, 1) if steps_to_verdict is not None and per_step is not None else None
    )
    rate = growth.get("rate_bytes_per_step")
    got = {
        "verdict": growth.get("verdict"),
        "step_source": growth.get("step_source"),
        "steps": steps,
        "warmup_steps": warmup,
        "verdict_step": verdict_step,
        "steps_to_verdict": steps_to_verdict,
        "iterations_per_step": round(per_step, 3) if per_step is not None else None,
        "iterations_to_verdict": iterations_to_verdict,
        "cause": growth.get("cause"),
        "cause_text": growth.get("cause_text"),
        "note": growth.get("note"),
        "rate_bytes_per_step": rate,
        "rate_bytes_per_iteration": round(rate / per_step, 1) if isinstance(rate, (int, float)) and per_step else None,
        "top_site": site_text(top_site),
        "site_match": site_match(case, top_site) if is_leak else None,
        "growing_sites": len([s for s in sites if isinstance(s, dict) and not s.get("bounded")]),
        "duration_s": process.get("duration_s"),
        "pid": process.get("pid"),
        "processes_in_report": len(report["processes"]),
        "torch_tracking": process.get("torch_tracking"),
        "events": process.get("events"),
    }
    record["got"] = got
    checks = record["checks"]
    # A control passes when it never gets LEAK (the rule); whether it reached NO LEAK or
    # stayed NOT YET is recorded in verdict_matches and counted in the totals.
    record["verdict_matches"] = got["verdict"] == case["expected"]["verdict"]
    checks["verdict"] = record["verdict_matches"] if is_leak else None
    checks["within_limit"] = (
        (got["verdict"] == "LEAK" and iterations_to_verdict is not None and iterations_to_verdict <= limit)
        if is_leak
        else None
    )
    checks["control_no_leak"] = (got["verdict"] != "LEAK" and verdict_step is None) if not is_leak else None
    causes = [case["expected"].get("cause")] + list(case["expected"].get("cause_alternatives", []))
    record["cause_matches"] = got["cause"] in causes if case["expected"].get("cause") else None
    record["pass"] = all(value is not False for value in checks.values())
    return record


def applies(check, is_leak):
    return check in ("verdict", "within_limit") if is_leak else check == "control_no_leak"


# ---------------------------------------------------------------------------
# Running


def case_environment(case):
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(case.get("env", {}))
    return env


def program_command(args, case):
    if case["program"].endswith(".cu"):
        program = [os.path.join(args.cuda_bin, program_name(case))]
    else:
        program = [args.python, os.path.join("examples", "loops", case["program"])]
    return program + ["--iterations", str(case["iterations"])]


def case_command(args, case, case_dir):
    program = program_command(args, case)
    if args.plain:
        return program
    return (
        [args.gpuleak, "run", "-o", case_dir, "--json-report", os.path.join(case_dir, "report.json")]
        + list(args.run_arg)
        + ["--"]
        + program
    )


def run_command(command, env, log_path, timeout_s):
    return corpus_runs.run_command(command, log_path, timeout_s, env, REPO)


def last_line(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip().startswith("iterations=")]
        return lines[-1] if lines else None
    except OSError:
        return None


def rescore_case(args, case):
    """The record for a case from traces recorded earlier: `gpuleak report --json` on them."""
    traces = sorted(
        os.path.join(args.rescore, case["id"], name)
        for name in os.listdir(os.path.join(args.rescore, case["id"]))
        if name.endswith(".trace")
    )
    case_dir = os.path.join(args.out, case["id"])
    os.makedirs(case_dir, exist_ok=True)
    report_path = os.path.join(case_dir, "report.json")
    command = [args.gpuleak, "report", "--json"] + traces
    started = time.monotonic()
    rc = corpus_runs.report_on_traces(args.gpuleak, traces, report_path, args.timeout)
    report, error = load_report(report_path)
    record = score_case(case, report, error, args.max_iterations_to_verdict)
    record.update(
        {
            "case": case["id"],
            "program": case["program"],
            "kind": case["kind"],
            "framework": case["framework"],
            "covers": case["covers"],
            "gate": case.get("gate", True),
            "iteration": case["iteration"],
            "iterations": case["iterations"],
            "env": case.get("env", {}),
            "command": command,
            "exit_status": rc,
            "timed_out": rc is None,
            "wall_s": round(time.monotonic() - started, 2),
            "program_output": None,
            "log": None,
        }
    )
    return record


def run_case(args, case):
    if args.rescore:
        return rescore_case(args, case)
    case_dir = os.path.join(args.out, case["id"])
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)  # gpuleak refuses a folder with traces of an earlier run
    os.makedirs(case_dir)
    command = case_command(args, case, case_dir)
    log_path = os.path.join(args.out, "logs", case["id"] + ".log")
    rc, wall_s, timed_out = run_command(command, case_environment(case), log_path, args.timeout)
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
            record = score_case(case, report, error, args.max_iterations_to_verdict)
        except Exception as failure:  # a report of an unexpected shape must not stop the run
            record = {
                "expected": {"verdict": case["expected"]["verdict"]},
                "got": None,
                "checks": {check: False for check in CHECKS},
                "pass": False,
                "error": "could not score the report: %s: %s" % (type(failure).__name__, failure),
            }
        if rc != 0 and record.get("error") is None:
            record["error"] = "exit status %s" % rc
    if timed_out:
        record["error"] = "timed out after %d s; %s" % (args.timeout, record.get("error") or "")
        record["pass"] = False
    record.update(
        {
            "case": case["id"],
            "program": case["program"],
            "kind": case["kind"],
            "framework": case["framework"],
            "covers": case["covers"],
            "gate": case.get("gate", True),
            "iteration": case["iteration"],
            "iterations": case["iterations"],
            "env": case.get("env", {}),
            "command": command,
            "exit_status": rc,
            "timed_out": timed_out,
            "wall_s": wall_s,
            "program_output": last_line(log_path),
            "log": os.path.relpath(log_path, args.out),
        }
    )
    return record


def totals(records, started, args):
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
        "not_gated": {r["case"]: {"pass": r["pass"], "verdict": got(r, "verdict")} for r in records if not r["gate"]},
        "wall_s": round(time.monotonic() - started, 1),
        "jobs": args.jobs,
    }
    if not args.plain:
        summary.update(
            {
                "leaks": len(leaks),
                "leaks_with_leak_verdict": sum(1 for r in leaks if got(r, "verdict") == "LEAK"),
                "leaks_within_limit": sum(1 for r in leaks if r["checks"].get("within_limit")),
                "max_iterations_to_verdict": args.max_iterations_to_verdict,
                "controls": len(controls),
                "controls_with_leak": [
                    r["case"] for r in controls if got(r, "verdict") == "LEAK" or got(r, "verdict_step") is not None
                ],
                "controls_with_no_leak_verdict": sum(1 for r in controls if got(r, "verdict") == "NO LEAK"),
                "controls_without_verdict": [
                    r["case"] for r in controls if got(r, "verdict") not in ("LEAK", "NO LEAK")
                ],
                "step_sources": sorted({str(got(r, "step_source")) for r in records}),
                "verdicts": {
                    v: sum(1 for r in records if str(got(r, "verdict")) == v)
                    for v in sorted({str(got(r, "verdict")) for r in records})
                },
                "top_site_exact_or_function": sum(1 for r in leaks if got(r, "site_match") in ("exact", "function")),
            }
        )
    return summary


def print_table(records, summary, plain, out=sys.stdout):
    if plain:
        header = "%-40s %-8s %5s %7s  %s" % ("case", "kind", "exit", "wall_s", "program output")
        out.write(header + "\n" + "-" * len(header) + "\n")
        for r in records:
            out.write(
                "%-40s %-8s %5s %7.1f  %s\n"
                % (
                    r["case"][:40],
                    r["kind"],
                    r["exit_status"],
                    r["wall_s"],
                    (r.get("program_output") or r.get("error") or "")[:70],
                )
            )
        out.write(
            "\n%d/%d gated programs ran and exited 0; %.0f s\n"
            % (summary["passed"], summary["gated_cases"], summary["wall_s"])
        )
        return
    header = "%-38s %-7s %-8s %-12s %5s %8s %7s %-8s %6s  %s" % (
        "case",
        "expect",
        "got",
        "step_source",
        "steps",
        "it->verd",
        "it/step",
        "site",
        "wall_s",
        "result",
    )
    out.write(header + "\n" + "-" * len(header) + "\n")
    for r in records:
        got = r.get("got") or {}
        result = (
            "PASS"
            if r["pass"]
            else "FAIL " + (r.get("error") or ",".join(check for check, value in r["checks"].items() if value is False))
        )
        if not r["gate"]:
            result = "(not gated) " + result
        out.write(
            "%-38s %-7s %-8s %-12s %5s %8s %7s %-8s %6.1f  %s\n"
            % (
                r["case"][:38],
                r["expected"]["verdict"],
                str(got.get("verdict") or "-")[:8],
                str(got.get("step_source") or "-")[:12],
                got.get("steps", "-"),
                "-" if got.get("iterations_to_verdict") is None else got["iterations_to_verdict"],
                "-" if got.get("iterations_per_step") is None else got["iterations_per_step"],
                got.get("site_match") or "-",
                r["wall_s"],
                result[:60],
            )
        )
    out.write(
        "\n%d/%d gated cases pass; leaks with LEAK %d/%d, within %d iterations %d/%d; controls with LEAK: %s;"
        " controls with NO LEAK %d/%d; step sources: %s; %.0f s\n"
        % (
            summary["passed"],
            summary["gated_cases"],
            summary["leaks_with_leak_verdict"],
            summary["leaks"],
            summary["max_iterations_to_verdict"],
            summary["leaks_within_limit"],
            summary["leaks"],
            ", ".join(summary["controls_with_leak"]) or "none",
            summary["controls_with_no_leak_verdict"],
            summary["controls"],
            ", ".join(summary["step_sources"]),
            summary["wall_s"],
        )
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", help="the gpuleak binary (required unless --plain)")
    parser.add_argument("--out", required=True, help="folder for traces, reports, logs and loops-corpus.json")
    parser.add_argument("--corpus", default=labels.CORPUS_JSON, help="the labels (default examples/loops/corpus.json)")
    parser.add_argument("--python", default="python3", help="the Python that runs the programs (default python3)")
    parser.add_argument(
        "--cuda-bin",
        help="folder with the binaries built from the .cu cases (nvcc); " "without it the .cu cases are skipped",
    )
    parser.add_argument("--jobs", type=int, default=6, help="cases at a time (default 6)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per case before it is killed (default 120)")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these cases")
    parser.add_argument(
        "--run-arg", action="append", default=[], metavar="ARG", help="extra argument for `gpuleak run` (repeat)"
    )
    parser.add_argument(
        "--max-iterations-to-verdict",
        type=float,
        default=50,
        help="a leak must be found within this many iterations after warm-up (default 50)",
    )
    parser.add_argument("--plain", action="store_true", help="run the programs without gpuleak (exit 0 and time)")
    parser.add_argument(
        "--rescore",
        metavar="TRACES",
        help="run no program: judge the traces recorded earlier under TRACES/<case id>/ "
        "with `<gpuleak> report --json` (the current analysis on H200 traces, "
        "no GPU needed); only the cases with a folder there",
    )
    args = parser.parse_args(argv)
    if not args.plain and not args.gpuleak:
        parser.error("--gpuleak is required (or --plain)")
    if args.gpuleak:
        args.gpuleak = os.path.abspath(args.gpuleak)
        if not os.access(args.gpuleak, os.X_OK):
            parser.error("%s is not an executable" % args.gpuleak)
    if args.cuda_bin:
        args.cuda_bin = os.path.abspath(args.cuda_bin)
    args.out = os.path.abspath(args.out)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    corpus = labels.load_corpus(args.corpus)
    cases = corpus["cases"]
    if args.only:
        unknown = set(args.only) - {c["id"] for c in cases}
        if unknown:
            sys.stderr.write("not in the corpus: %s\n" % ", ".join(sorted(unknown)))
            return 2
        cases = [c for c in cases if c["id"] in args.only]
    skipped = []
    if args.rescore:
        args.rescore = os.path.abspath(args.rescore)
        cases = [c for c in cases if os.path.isdir(os.path.join(args.rescore, c["id"]))]
    elif not args.cuda_bin:
        skipped = [c["id"] for c in cases if c["program"].endswith(".cu")]
        cases = [c for c in cases if not c["program"].endswith(".cu")]
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    started = time.monotonic()
    records = {}

    def write_results(complete):
        """Writes loops-corpus.json; also after each case, so a run cut short keeps what it finished."""
        ordered = [records[c["id"]] for c in cases if c["id"] in records]
        summary = totals(ordered, started, args)
        summary["skipped_without_cuda_bin"] = skipped
        summary["not_finished"] = [c["id"] for c in cases if c["id"] not in records]
        result = {
            "schema": SCHEMA,
            "complete": complete,
            "command": [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)] + argv,
            "mode": "plain" if args.plain else "rescore" if args.rescore else "gpuleak",
            "corpus": os.path.relpath(args.corpus, REPO),
            "totals": summary,
            "cases": ordered,
        }
        path = os.path.join(args.out, "loops-corpus.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
            handle.write("\n")
        os.replace(path + ".tmp", path)
        return ordered, summary

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_case, args, case): case for case in cases}
        for future in concurrent.futures.as_completed(futures):
            case = futures[future]
            records[case["id"]] = future.result()
            sys.stderr.write("%-40s %s\n" % (case["id"], "pass" if records[case["id"]]["pass"] else "FAIL"))
            write_results(complete=False)
    ordered, summary = write_results(complete=True)
    print_table(ordered, summary, args.plain)
    return 0 if summary["passed"] == summary["gated_cases"] and not skipped else 1


if __name__ == "__main__":
    sys.exit(main())
