#!/usr/bin/env python3
"""Runs the labelled PyTorch leak corpus under `gpuleak run` on a GPU and scores the verdicts.

For every case of examples/torch/corpus.json it runs

    <gpuleak> run -o <out>/<case> --json-report <out>/<case>/report.json -- python3 examples/torch/<script> --steps N

up to --jobs cases at a time (each in its own process group, killed at
--timeout), reads report.json (schema gpuleak-report/1), picks the process
whose command line runs the script, and compares gpuleak's growth verdict with
the labels:

  verdict         expected LEAK / NO LEAK
  cause           tensors-kept-alive, autograd-graph-kept-alive, non-tensor-driver-allocations, bounded-growth, none
  holder          type, name and owner of what keeps the memory (owner compared without "(file:line)")
  site            the top growing site is the marked `# LEAK:` line ("exact"), or lies in the marked
                  line's function or in a labelled site function ("function")
  steps_to_verdict  verdict_step - warmup_steps; the 4 KiB case must be found within 50
  control_no_leak   a control never gets LEAK (final verdict and verdict_step)

It writes <out>/torch-corpus.json (every case, totals, the exact commands) and
prints a table. A missing or malformed report fails that case and the run goes
on. Exit status: 0 when every case passes, 1 otherwise, 2 for bad arguments.

    python3 tests/gpu/torch_corpus.py --gpuleak build/gpuleak --out /tmp/torch-corpus
    python3 tests/gpu/torch_corpus.py --plain --out /tmp/plain   # the scripts alone, no gpuleak
    python3 tests/gpu/torch_corpus.py --gpuleak build/gpuleak --rescore /tmp/torch-corpus --out /tmp/rescored  # no GPU

Standard library only (Python 3.8+); run from anywhere, paths resolve from this file.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples", "torch")
sys.path.insert(0, EXAMPLES)
import corpus_tools  # noqa: E402  (examples/torch/corpus_tools.py)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_runs  # noqa: E402
from corpus_reports import holder_of, load_report, pick_process  # noqa: E402

SCHEMA = "gpuleak-torch-corpus-results/1"
WARMUP_CASE = "control_missing_zero_grad.py"  # runs alone first: builds gpuleak's cached PyTorch hook shim
SMALL_CASE = "leak_small_tensor_per_step.py"
CHECKS = ("verdict", "cause", "holder", "site", "steps_to_verdict", "control_no_leak")


# ---------------------------------------------------------------------------
# Comparing with the labels

_OWNER = re.compile(r"^(local of|attribute of|closure of|hook on|module)\s+(.+)$")


def normalize_owner(owner):
    """'local of train (x.py:12)' -> 'local of train'; 'closure of f.<locals>.log' -> 'closure of log'."""
    if not isinstance(owner, str):
        return owner
    text = re.sub(r"\s*\([^()]*\)\s*$", "", owner.strip())
    match = _OWNER.match(text)
    if match and match.group(1) != "module":
        return "%s %s" % (match.group(1), match.group(2).split(".")[-1])
    return text


def holder_matches(expected, got):
    if got is None:
        return False
    # Type names compare without case: the walk reports Python's own type
    # name ("Tensor"), labels may write it in prose ("tensor").
    if expected.get("type") is not None and str(expected["type"]).lower() != str(got.get("type")).lower():
        return False
    if expected.get("name") is not None and expected["name"] != got.get("name"):
        return False
    if expected.get("owner") is not None and normalize_owner(expected["owner"]) != normalize_owner(got.get("owner")):
        return False
    for field in ("bounded", "maxlen"):
        if field in expected and expected[field] != got.get(field):
            return False
    return True


def describe_holder(holder):
    if not holder:
        return None
    text = "%s %s (%s)" % (holder.get("type"), holder.get("name"), normalize_owner(holder.get("owner")))
    if holder.get("bounded"):
        text += " bounded maxlen=%s" % holder.get("maxlen")
    return text


def site_match(case, top_site, ranges):
    """'exact', 'function' or 'no' for the top growing site against the case's marked line."""
    if not isinstance(top_site, dict):
        return "no"
    location = top_site.get("site") if isinstance(top_site.get("site"), dict) else top_site
    path, line = location.get("file") or "", location.get("line")
    if os.path.basename(str(path)) != case["script"] or not isinstance(line, int):
        return "no"
    marked = case.get("marked_line")
    if marked and line == int(marked.rsplit(":", 1)[1]):
        return "exact"
    for name in [case.get("marked_function")] + list(case.get("site_functions", [])):
        if name in ranges and ranges[name][0] <= line <= ranges[name][1]:
            return "function"
    return "no"


def site_text(top_site):
    if not isinstance(top_site, dict):
        return None
    location = top_site.get("site") if isinstance(top_site.get("site"), dict) else top_site
    return "%s:%s %s" % (
        os.path.basename(str(location.get("file"))),
        location.get("line"),
        location.get("function") or "",
    )


def applicable_checks(case):
    """The checks that apply to a case (the others are recorded as null)."""
    expected = case["expected"]
    checks = {"verdict", "cause"}
    if case["kind"] == "leak":
        checks |= {"holder", "site"}
    else:
        checks.add("control_no_leak")
        if expected.get("holder") is not None:
            checks.add("holder")
    if expected.get("max_steps_to_verdict") is not None:
        checks.add("steps_to_verdict")
    return checks


def score_case(case, report, report_error):
    """The per-case record: what was expected, what gpuleak said, and pass/fail per check."""
    expected = case["expected"]
    is_leak = case["kind"] == "leak"
    scanned = corpus_tools.scanned_labels(case["script"])
    case = dict(case, marked_line=scanned["marked_line"], marked_function=scanned["marked_function"])
    ranges = corpus_tools.function_ranges(os.path.join(EXAMPLES, case["script"]))
    record = {
        "expected": {
            "verdict": expected["verdict"],
            "cause": expected.get("cause"),
            "holder": describe_holder(expected.get("holder")),
            "marked_line": case["marked_line"],
            "bytes_per_step": case.get("bytes_per_step"),
        },
        "got": None,
        "checks": {},
        "error": report_error,
    }
    checks = record["checks"]
    process = pick_process(report, case["script"]) if report else None
    if report and process is None:
        record["error"] = "no process in the report runs %s (%d processes)" % (case["script"], len(report["processes"]))
    growth = process.get("growth") if process else None
    if process is not None and not isinstance(growth, dict):
        record["error"] = "the process has no 'growth' object"
        growth = None
    applicable = applicable_checks(case)
    if growth is None:
        for check in CHECKS:
            checks[check] = False if check in applicable else None
        record["pass"] = False
        return record

    holder, holder_kind = holder_of(growth)
    sites = growth.get("sites") if isinstance(growth.get("sites"), list) else []
    top_site = sites[0] if sites else None
    verdict_step, warmup = growth.get("verdict_step"), growth.get("warmup_steps")
    steps_to_verdict = verdict_step - warmup if isinstance(verdict_step, int) and isinstance(warmup, int) else None
    rate = growth.get("rate_bytes_per_step")
    got = {
        "verdict": growth.get("verdict"),
        "cause": growth.get("cause"),
        "holder": describe_holder(holder),
        "holder_object": holder,
        "holder_kind": holder_kind,
        "top_site": site_text(top_site),
        "site_match": site_match(case, top_site, ranges) if is_leak else None,
        "rate_bytes_per_step": rate,
        "rate_vs_label": round(rate / case["bytes_per_step"], 3)
        if isinstance(rate, (int, float)) and case.get("bytes_per_step")
        else None,
        "first_growing_step": growth.get("first_growing_step"),
        "verdict_step": verdict_step,
        "warmup_steps": warmup,
        "steps": growth.get("steps"),
        "step_source": growth.get("step_source"),
        "steps_to_verdict": steps_to_verdict,
        "cause_text": growth.get("cause_text"),
        "note": growth.get("note"),
        "pid": process.get("pid"),
        "processes_in_report": len(report["processes"]),
    }
    record["got"] = got

    checks["verdict"] = got["verdict"] == expected["verdict"]
    causes = [expected.get("cause")] + list(expected.get("cause_alternatives", []))
    checks["cause"] = got["cause"] in causes
    if expected.get("holder") is not None:
        holders = [expected["holder"]] + list(expected.get("holder_alternatives", []))
        checks["holder"] = any(holder_matches(h, holder) for h in holders)
    elif is_leak:
        checks["holder"] = holder is None  # nothing in Python holds it: naming a holder would be wrong
    else:
        checks["holder"] = None
    checks["site"] = got["site_match"] in ("exact", "function") if is_leak else None
    limit = expected.get("max_steps_to_verdict")
    checks["steps_to_verdict"] = (
        (steps_to_verdict is not None and steps_to_verdict <= limit) if limit is not None else None
    )
    checks["control_no_leak"] = (got["verdict"] != "LEAK" and verdict_step is None) if not is_leak else None
    for check in CHECKS:
        if check not in applicable:
            checks[check] = None
    record["pass"] = all(value is not False for value in checks.values())
    return record


# ---------------------------------------------------------------------------
# Running


def case_name(script):
    return os.path.splitext(script)[0]


def child_environment():
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "4")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_command(command, log_path, timeout_s):
    return corpus_runs.run_command(command, log_path, timeout_s, child_environment(), REPO)


def case_command(args, case, case_dir):
    program = [args.python, os.path.join("examples", "torch", case["script"]), "--steps", str(case["steps"])]
    if args.plain:
        return program
    return (
        [args.gpuleak, "run", "-o", case_dir, "--json-report", os.path.join(case_dir, "report.json")]
        + list(args.run_arg)
        + ["--"]
        + program
    )


def rescore_case(args, case):
    """The record for a case from its traces recorded earlier (TRACES/<case>/*.trace):
    `gpuleak report --json` on them with this build (the holder answers are in the traces)."""
    name = case_name(case["script"])
    source = os.path.join(args.rescore, name)
    traces = sorted(os.path.join(source, f) for f in os.listdir(source) if f.endswith(".trace"))
    case_dir = os.path.join(args.out, name)
    os.makedirs(case_dir, exist_ok=True)
    report_path = os.path.join(case_dir, "report.json")
    command = [args.gpuleak, "report", "--json"] + traces
    started = time.monotonic()
    rc = corpus_runs.report_on_traces(args.gpuleak, traces, report_path, args.timeout)
    report, error = load_report(report_path)
    record = score_case(case, report, error)
    record.update(
        {
            "case": name,
            "script": case["script"],
            "kind": case["kind"],
            "covers": case.get("covers"),
            "steps": case["steps"],
            "command": command,
            "exit_status": rc,
            "timed_out": rc is None,
            "wall_s": round(time.monotonic() - started, 2),
            "log": None,
        }
    )
    return record


def run_case(args, case):
    if args.rescore:
        return rescore_case(args, case)
    name = case_name(case["script"])
    case_dir = os.path.join(args.out, name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)  # gpuleak refuses a folder with traces of an earlier run
    os.makedirs(case_dir)
    command = case_command(args, case, case_dir)
    log_path = os.path.join(args.out, "logs", name + ".log")
    rc, wall_s, timed_out = run_command(command, log_path, args.timeout)
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
                "checks": {check: False for check in CHECKS},
                "pass": False,
                "error": "could not score the report: %s: %s" % (type(failure).__name__, failure),
            }
    if timed_out:
        record["error"] = "timed out after %d s; %s" % (args.timeout, record.get("error") or "")
        record["pass"] = False
    record.update(
        {
            "case": name,
            "script": case["script"],
            "kind": case["kind"],
            "covers": case.get("covers"),
            "steps": case["steps"],
            "command": command,
            "exit_status": rc,
            "timed_out": timed_out,
            "wall_s": wall_s,
            "log": os.path.relpath(log_path, args.out),
        }
    )
    return record


def totals(records, started, args):
    leaks = [r for r in records if r["kind"] == "leak"]
    controls = [r for r in records if r["kind"] == "control"]
    per_check = {}
    for check in CHECKS:
        applicable = [r for r in records if r["checks"].get(check) is not None]
        per_check[check] = {"passed": sum(1 for r in applicable if r["checks"][check]), "of": len(applicable)}
    small = next((r for r in records if r["script"] == SMALL_CASE), None)
    return {
        "cases": len(records),
        "passed": sum(1 for r in records if r["pass"]),
        "failed": [r["case"] for r in records if not r["pass"]],
        "leaks": len(leaks),
        "leaks_found": sum(1 for r in leaks if r.get("got") and r["got"]["verdict"] == "LEAK"),
        "controls": len(controls),
        "controls_with_leak": [
            r["case"]
            for r in controls
            if r.get("got") and (r["got"]["verdict"] == "LEAK" or r["got"]["verdict_step"] is not None)
        ],
        "checks": per_check,
        "small_tensor_steps_to_verdict": small["got"]["steps_to_verdict"] if small and small.get("got") else None,
        "small_tensor_found_within_50": bool(small and small["checks"].get("steps_to_verdict")),
        "wall_s": round(time.monotonic() - started, 1),
        "jobs": args.jobs,
    }


def yes_no(value):
    return "-" if value is None else ("ok" if value else "FAIL")


def result_text(record):
    if record["pass"]:
        return "PASS"
    failed = [check for check, value in record["checks"].items() if value is False]
    return "FAIL " + "; ".join(filter(None, [record.get("error"), ",".join(failed) if record.get("got") else None]))


def print_table(records, summary, out=sys.stdout):
    header = "%-38s %-8s %-16s %-5s %-5s %-9s %10s %7s  %s" % (
        "case",
        "expect",
        "got",
        "cause",
        "hold",
        "site",
        "to_verdict",
        "wall_s",
        "result",
    )
    out.write(header + "\n" + "-" * len(header) + "\n")
    for r in records:
        got = r.get("got") or {}
        site = got.get("site_match") or "-"
        steps = got.get("steps_to_verdict")
        out.write(
            "%-38s %-8s %-16s %-5s %-5s %-9s %10s %7.1f  %s\n"
            % (
                r["case"][:38],
                r["expected"]["verdict"],
                (got.get("verdict") or "-")[:16],
                yes_no(r["checks"].get("cause")),
                yes_no(r["checks"].get("holder")),
                site,
                "-" if steps is None else steps,
                r["wall_s"],
                result_text(r),
            )
        )
    out.write(
        "\n%d/%d cases pass; leaks found %d/%d; controls with LEAK: %s; 4 KiB case found %s steps after warm-up; %.0f s\n"
        % (
            summary["passed"],
            summary["cases"],
            summary["leaks_found"],
            summary["leaks"],
            ", ".join(summary["controls_with_leak"]) or "none",
            summary["small_tensor_steps_to_verdict"],
            summary["wall_s"],
        )
    )
    for check, counts in summary["checks"].items():
        out.write("  %-17s %d/%d\n" % (check, counts["passed"], counts["of"]))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", help="the gpuleak binary (required unless --plain)")
    parser.add_argument("--out", required=True, help="folder for traces, reports, logs and torch-corpus.json")
    parser.add_argument(
        "--corpus", default=corpus_tools.CORPUS_JSON, help="the labels (default examples/torch/corpus.json)"
    )
    parser.add_argument("--python", default="python3", help="the Python that runs the scripts (default python3)")
    parser.add_argument("--jobs", type=int, default=4, help="cases at a time (default 4)")
    parser.add_argument(
        "--timeout", type=int, default=150, help="seconds per case before its processes are killed (default 150)"
    )
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these scripts")
    parser.add_argument(
        "--run-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `gpuleak run` (repeat), e.g. --run-arg=--torch-mode=async",
    )
    parser.add_argument(
        "--plain", action="store_true", help="run the scripts without gpuleak (a baseline: exit 0 and time)"
    )
    parser.add_argument(
        "--rescore",
        metavar="TRACES",
        help="no GPU: score the traces of an earlier run (TRACES/<case>/*.trace, the --out "
        "of that run) with this --gpuleak's report",
    )
    args = parser.parse_args(argv)
    if not args.plain and not args.gpuleak:
        parser.error("--gpuleak is required (or --plain)")
    if args.gpuleak:
        args.gpuleak = os.path.abspath(args.gpuleak)
        if not os.access(args.gpuleak, os.X_OK):
            parser.error("%s is not an executable" % args.gpuleak)
    args.out = os.path.abspath(args.out)
    if args.rescore:
        args.rescore = os.path.abspath(args.rescore)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    corpus = corpus_tools.load_corpus(args.corpus)
    cases = corpus["cases"]
    if args.only:
        unknown = set(args.only) - {c["script"] for c in cases}
        if unknown:
            sys.stderr.write("not in the corpus: %s\n" % ", ".join(sorted(unknown)))
            return 2
        cases = [c for c in cases if c["script"] in args.only]
    if args.rescore:
        cases = [c for c in cases if os.path.isdir(os.path.join(args.rescore, case_name(c["script"])))]
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    started = time.monotonic()
    first = [c for c in cases if c["script"] == WARMUP_CASE]
    rest = [c for c in cases if c["script"] != WARMUP_CASE]
    records = {}
    for case in first:
        records[case["script"]] = run_case(args, case)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_case, args, case): case for case in rest}
        for future in concurrent.futures.as_completed(futures):
            case = futures[future]
            records[case["script"]] = future.result()
            sys.stderr.write("%-40s %s\n" % (case["script"], "pass" if records[case["script"]]["pass"] else "FAIL"))
    ordered = [records[c["script"]] for c in cases]
    summary = totals(ordered, started, args)
    result = {
        "schema": SCHEMA,
        "command": [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)]
        + (sys.argv[1:] if argv is None else list(argv)),
        "mode": "plain" if args.plain else "rescore" if args.rescore else "gpuleak",
        "corpus": os.path.relpath(args.corpus, REPO),
        "totals": summary,
        "cases": ordered,
    }
    with open(os.path.join(args.out, "torch-corpus.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    print_table(ordered, summary)
    return 0 if summary["passed"] == summary["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
