#!/usr/bin/env python3
"""Runs the holder-kind corpus (examples/torch/holders/) under `gpuleak run` on a GPU and scores it.

For every case of examples/torch/holders/holders.json it runs

    <gpuleak> run -o <out>/<case> --json-report <out>/<case>/report.json -- python3 examples/torch/holders/<script> --steps N

up to --jobs cases at a time, reads report.json, picks the process that runs
the script, and scores, per case:

  verdict     LEAK
  holder      type, name and owner of growth.holder match the label (or an alternative)
  kept_line   the keeping statement gpuleak names (holder.kept_at) is within 1 line of the label
  site        the top growing site is a frame of the case script (never gpuleak's or PyTorch's)
  cause       (recorded, not part of pass) growth.cause against the label

A case passes when verdict, holder, kept_line and site are all right. It writes
<out>/holder-corpus.json (every case, what was expected, what gpuleak said,
the commands) and prints a table. Exit 0 when every case passes, 1 otherwise.

    python3 tests/gpu/holder_corpus.py --gpuleak dist/gpuleak --out /tmp/holders

Standard library only; paths resolve from this file.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(REPO, "examples", "torch", "holders")
sys.path.insert(0, CORPUS)
sys.path.insert(0, HERE)
import holder_labels  # noqa: E402  (examples/torch/holders/holder_labels.py)
import corpus_reports  # noqa: E402  (tests/gpu/corpus_reports.py: report reading)
import torch_corpus  # noqa: E402  (tests/gpu/torch_corpus.py: running)

SCHEMA = "gpuleak-holder-corpus-results/1"
CHECKS = ("verdict", "holder", "kept_line", "site")


def kept_at_of(holder):
    kept = holder.get("kept_at") if isinstance(holder, dict) else None
    return kept if isinstance(kept, dict) else None


def score_case(case, report, report_error):
    expected = case["expected"]
    labelled_line = int(expected["kept_line"].rsplit(":", 1)[1])
    record = {
        "expected": {
            "holder": torch_corpus.describe_holder(expected["holder"]),
            "kept_line": expected["kept_line"],
            "cause": expected.get("cause"),
        },
        "got": None,
        "checks": {check: False for check in CHECKS},
        "error": report_error,
    }
    process = corpus_reports.pick_process(report, case["script"]) if report else None
    growth = process.get("growth") if process else None
    if not isinstance(growth, dict):
        record["error"] = record["error"] or "no process of the report runs %s" % case["script"]
        record["pass"] = False
        return record
    holder, holder_kind = corpus_reports.holder_of(growth)
    kept = kept_at_of(holder)
    sites = growth.get("sites") if isinstance(growth.get("sites"), list) else []
    top = sites[0] if sites else {}
    location = top.get("site") if isinstance(top.get("site"), dict) else {}
    got = {
        "verdict": growth.get("verdict"),
        "cause": growth.get("cause"),
        "holder": torch_corpus.describe_holder(holder),
        "holder_object": holder,
        "holder_kind": holder_kind,
        "kept_at": "%s:%s  %s" % (os.path.basename(str(kept.get("file"))), kept.get("line"), kept.get("statement"))
        if kept
        else None,
        "top_site": "%s:%s %s"
        % (os.path.basename(str(location.get("file"))), location.get("line"), location.get("function") or ""),
        "top_site_backward_node": location.get("backward_node") or None,
        "first_growing_step": growth.get("first_growing_step"),
        "warmup_steps": growth.get("warmup_steps"),
        "rate_bytes_per_step": growth.get("rate_bytes_per_step"),
        "fix": growth.get("fix"),
        "note": growth.get("note"),
    }
    record["got"] = got
    checks = record["checks"]
    checks["verdict"] = got["verdict"] == "LEAK"
    right = [expected["holder"]] + list(expected.get("holder_alternatives", []))
    checks["holder"] = any(torch_corpus.holder_matches(h, holder) for h in right)
    checks["kept_line"] = (
        bool(kept)
        and os.path.basename(str(kept.get("file"))) == case["script"]
        and isinstance(kept.get("line"), int)
        and abs(kept["line"] - labelled_line) <= 1
    )
    checks["site"] = os.path.basename(str(location.get("file"))) == case["script"]
    causes = [expected.get("cause")] + list(expected.get("cause_alternatives", []))
    record["cause_right"] = got["cause"] in causes
    record["pass"] = all(checks.values())
    return record


def run_case(args, case):
    name = os.path.splitext(case["script"])[0]
    case_dir = os.path.join(args.out, name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)
    command = [
        args.gpuleak,
        "run",
        "-o",
        case_dir,
        "--json-report",
        os.path.join(case_dir, "report.json"),
        "--",
        args.python,
        os.path.join("examples", "torch", "holders", case["script"]),
        "--steps",
        str(case["steps"]),
    ]
    log_path = os.path.join(args.out, "logs", name + ".log")
    rc, wall_s, timed_out = torch_corpus.run_command(command, log_path, args.timeout)
    report, error = corpus_reports.load_report(os.path.join(case_dir, "report.json"))
    try:
        record = score_case(case, report, error)
    except Exception as failure:  # a report of an unexpected shape must not stop the run
        record = {
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
            "holder_kind": case["holder_kind"],
            "engine_thread": case.get("engine_thread"),
            "reported": case["reported"],
            "command": command,
            "exit_status": rc,
            "wall_s": wall_s,
            "log": os.path.relpath(log_path, args.out),
        }
    )
    for path in os.listdir(case_dir):  # keep results small: traces are not kept
        if path.endswith(".trace") and not args.keep_traces:
            os.unlink(os.path.join(case_dir, path))
    return record


def print_table(records, summary, out=sys.stdout):
    header = "%-40s %-5s %-5s %-5s %-5s %-5s %6s  %s" % (
        "case",
        "leak",
        "hold",
        "kept",
        "site",
        "cause",
        "wall_s",
        "holder / kept at (got)",
    )
    out.write(header + "\n" + "-" * len(header) + "\n")
    for r in records:
        got = r.get("got") or {}
        mark = lambda value: "ok" if value else "FAIL"  # noqa: E731
        out.write(
            "%-40s %-5s %-5s %-5s %-5s %-5s %6.1f  %s | %s%s\n"
            % (
                r["case"][:40],
                mark(r["checks"].get("verdict")),
                mark(r["checks"].get("holder")),
                mark(r["checks"].get("kept_line")),
                mark(r["checks"].get("site")),
                "ok" if r.get("cause_right") else "-",
                r.get("wall_s") or 0,
                got.get("holder"),
                got.get("kept_at"),
                (" ; " + r["error"]) if r.get("error") else "",
            )
        )
    out.write(
        "\n%d/%d cases pass (holder %d, kept line %d, site %d, verdict %d, cause %d); %.0f s\n"
        % (
            summary["passed"],
            summary["cases"],
            summary["checks"]["holder"],
            summary["checks"]["kept_line"],
            summary["checks"]["site"],
            summary["checks"]["verdict"],
            summary["cause_right"],
            summary["wall_s"],
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--python", default="python3")
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--only", nargs="+", metavar="SCRIPT")
    parser.add_argument("--keep-traces", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    args.gpuleak = os.path.abspath(args.gpuleak)
    args.out = os.path.abspath(args.out)
    labels = holder_labels.load_labels()
    cases = [c for c in labels["cases"] if not args.only or c["script"] in args.only]
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {c["script"]: pool.submit(run_case, args, c) for c in cases}
        records = [futures[c["script"]].result() for c in cases]
    summary = {
        "cases": len(records),
        "passed": sum(1 for r in records if r["pass"]),
        "failed": [r["case"] for r in records if not r["pass"]],
        "checks": {check: sum(1 for r in records if r["checks"].get(check)) for check in CHECKS},
        "cause_right": sum(1 for r in records if r.get("cause_right")),
        "wall_s": round(time.monotonic() - started, 1),
        "jobs": args.jobs,
    }
    result = {
        "schema": SCHEMA,
        "about": "the holder-kind corpus under gpuleak run: per case, is the holder "
        "named (type, name, owner), is the keeping statement within 1 line of the label, is the top "
        "growing site a frame of the case script, and is the verdict LEAK (tests/gpu/holder_corpus.py)",
        "command": [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)]
        + (sys.argv[1:] if argv is None else list(argv)),
        "totals": summary,
        "cases": records,
    }
    with open(os.path.join(args.out, "holder-corpus.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    print_table(records, summary)
    return 0 if summary["passed"] == summary["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
