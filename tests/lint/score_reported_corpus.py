#!/usr/bin/env python3
"""Recall and precision of `gpuleak lint` on tests/lint/reported (see its README).

Runs the gpuleak binary once over the folder (`lint --format json --no-config`), reads the
`# leak` labels of every file, and scores:

- a leak (the set of lines marked `# leak`, or `# leak:N` for a second leak) is found when a
  finding starts on one of its lines;
- a finding is right when it starts on a labelled line, wrong otherwise; findings are counted
  once per (file, line), whatever the number of rules on that line.

Prints one line per file and a summary, writes the figures as JSON. With --min-recall and
--min-precision it exits 1 when a figure is below its bound (used by ctest).

Usage:
    python3 tests/lint/score_reported_corpus.py [--gpuleak build/gpuleak]
        [--corpus tests/lint/reported] [--out bench/results/lint-reported-corpus.json]
        [--min-recall 0.9] [--min-precision 0.95]
"""
import argparse
import json
import os
import re
import subprocess
import sys

LABEL = re.compile(r"#\s*leak(?::(\d+))?\s*$")


def leak_labels(path):
    """{leak id: set of 1-based lines} for one file."""
    leaks = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = LABEL.search(line.rstrip("\n"))
            if m:
                leaks.setdefault(m.group(1) or "1", set()).add(number)
    return leaks


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", default=os.path.join(root, "build", "gpuleak"))
    parser.add_argument("--corpus", default=os.path.join(here, "reported"))
    parser.add_argument("--out", default=os.path.join(root, "bench", "results", "lint-reported-corpus.json"))
    parser.add_argument("--min-recall", type=float, default=None)
    parser.add_argument("--min-precision", type=float, default=None)
    args = parser.parse_args()

    files = sorted(f for f in os.listdir(args.corpus) if f.endswith(".py"))
    run = subprocess.run(
        [args.gpuleak, "lint", "--format", "json", "--no-config", "--color", "never", args.corpus],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode not in (0, 1, 3):
        sys.exit(f"gpuleak lint exited {run.returncode}: {run.stderr.strip()}")
    report = json.loads(run.stdout)

    findings = {}
    for f in report["findings"]:
        findings.setdefault(os.path.basename(f["path"]), {}).setdefault(f["line"], []).append(f["rule"])
    not_linted = {os.path.basename(p["path"]): p["message"] for p in report["files_not_linted"]}

    rows = []
    leaks_total = leaks_found = right = wrong = 0
    for name in files:
        leaks = leak_labels(os.path.join(args.corpus, name))
        labelled = set().union(*leaks.values()) if leaks else set()
        lines = findings.get(name, {})
        found = [k for k, ls in sorted(leaks.items()) if any(line in lines for line in ls)]
        file_right = sorted(line for line in lines if line in labelled)
        file_wrong = sorted(line for line in lines if line not in labelled)
        leaks_total += len(leaks)
        leaks_found += len(found)
        right += len(file_right)
        wrong += len(file_wrong)
        rows.append(
            {
                "file": name,
                "leaks": len(leaks),
                "leaks_found": len(found),
                "leak_lines": sorted(labelled),
                "findings": [{"line": line, "rules": sorted(set(rules))} for line, rules in sorted(lines.items())],
                "wrong_lines": file_wrong,
                "not_linted": not_linted.get(name),
            }
        )
        if leaks:
            verdict = "found" if len(found) == len(leaks) else "MISSED"
        else:
            verdict = "clean" if not file_wrong else "FALSE POSITIVE"
        shown = ", ".join(f"{line}:{'/'.join(sorted(set(r)))}" for line, r in sorted(lines.items())) or "-"
        extra = f"  (not linted: {not_linted[name]})" if name in not_linted else ""
        print(f"{verdict:15} {name:60} {shown}{extra}")

    recall = leaks_found / leaks_total if leaks_total else None
    precision = right / (right + wrong) if right + wrong else None
    summary = {
        "files": len(files),
        "files_with_leaks": sum(1 for r in rows if r["leaks"]),
        "clean_files": sum(1 for r in rows if not r["leaks"]),
        "leaks": leaks_total,
        "leaks_found": leaks_found,
        "findings": right + wrong,
        "findings_right": right,
        "findings_wrong": wrong,
        "recall": round(recall, 3) if recall is not None else None,
        "precision": round(precision, 3) if precision is not None else None,
        "files_not_linted": len(not_linted),
    }
    print(
        f"\nrecall {leaks_found}/{leaks_total} = {summary['recall']}, "
        f"precision {right}/{right + wrong} = {summary['precision']}, "
        f"{len(not_linted)} file(s) not linted"
    )
    result = {
        "what": "gpuleak lint on tests/lint/reported (leak patterns from public reports)",
        "command": "python3 tests/lint/score_reported_corpus.py",
        "gpuleak_version": report.get("tool", {}).get("version"),
        "summary": summary,
        "files": rows,
    }
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    failed = False
    if args.min_recall is not None and (recall or 0) < args.min_recall:
        print(f"recall {summary['recall']} is below {args.min_recall}", file=sys.stderr)
        failed = True
    if args.min_precision is not None and (precision if precision is not None else 1) < args.min_precision:
        print(f"precision {summary['precision']} is below {args.min_precision}", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
