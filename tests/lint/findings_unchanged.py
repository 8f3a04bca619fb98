#!/usr/bin/env python3
"""Checks that a change to `gpuleak lint` left every finding as it was.

Refactors and memory work on the linter must not change what it reports. This runs
`gpuleak lint --no-config --format json` over the given trees and either saves the output
(`--save`, before the change) or compares it byte for byte with a saved one (`--against`,
after). Only `summary.seconds` (wall time) is blanked: everything else, findings, fix texts,
frames, files not linted, statements not parsed and counts, must be identical.

Usage (from the repository root):
    python3 tests/lint/findings_unchanged.py --gpuleak OLD_BUILD --save /tmp/before.json
    python3 tests/lint/findings_unchanged.py --gpuleak build/gpuleak --against /tmp/before.json
The default trees are tests/lint (its corpora and fixtures) and /usr/lib/python3/dist-packages.
Exit 0 when identical (or saved), 1 with the first differing lines otherwise.
"""
import argparse
import difflib
import json
import os
import subprocess
import sys


def lint_output(gpuleak, paths):
    # The exit code says whether there were findings or unreadable files: both expected here.
    done = subprocess.run(
        [gpuleak, "lint", "--no-config", "--format", "json", *paths],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode not in (0, 1, 3):
        sys.exit(f"{gpuleak} lint exited {done.returncode}")
    report = json.loads(done.stdout)
    report["summary"]["seconds"] = None
    # Keys keep gpuleak's order; indentation makes a difference readable line by line.
    return json.dumps(report, indent=1, ensure_ascii=False) + "\n"


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", default=os.path.join(repo, "build", "gpuleak"))
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", help="write the output here")
    action.add_argument("--against", help="compare with the output saved here")
    parser.add_argument("paths", nargs="*", default=["tests/lint", "/usr/lib/python3/dist-packages"])
    args = parser.parse_args()
    os.chdir(repo)  # paths in the report are as given: relative to the repository root
    now = lint_output(args.gpuleak, args.paths)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as out:
            out.write(now)
        report = json.loads(now)
        print(f"saved {args.save}: {report['summary']['files']} files, " f"{report['summary']['findings']} findings")
        return 0
    with open(args.against, encoding="utf-8") as saved:
        before = saved.read()
    if before == now:
        report = json.loads(now)
        print(
            f"identical: {report['summary']['files']} files, "
            f"{report['summary']['findings']} findings, {len(now)} bytes of JSON"
        )
        return 0
    diff = difflib.unified_diff(before.splitlines(), now.splitlines(), "before", "now", lineterm="", n=2)
    for i, line in enumerate(diff):
        if i >= 60:
            print("...")
            break
        print(line)
    return 1


if __name__ == "__main__":
    sys.exit(main())
