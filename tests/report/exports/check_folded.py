#!/usr/bin/env python3
"""Checks a `gpuleak report --format folded` file: folded stacks, one
"root;caller;...;leaf COUNT" line per stack, as flamegraph.pl, inferno and
speedscope read them.

    check_folded.py FILE [--expect-top-frame S] [--no-speedscope] [--node PATH]

1. Every line is frames joined by ';' (none empty), one space, a non-negative
   integer; no blank lines; at least one line.
2. speedscope imports it with its own folded-stacks importer
   (check_speedscope.mjs --input folded) and its Sandwich view's top frame is
   the same leaf this script computes.
--expect-top-frame: the leaf frame with the most weight, summed over the
lines it ends (speedscope's Sandwich view orders frames the same way).
Exit 0: valid and the expectations hold; 1: not; 77: speedscope, Node or
Chromium is missing (--no-speedscope checks the text alone).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^(?P<stack>[^;\n]+(?:;[^;\n]+)*) (?P<count>\d+)$")
SPEEDSCOPE_TIMEOUT_S = 90


class Rejected(Exception):
    """The file is not folded stacks, or an expectation does not hold."""


def read_folded(path):
    with open(path, encoding="utf-8") as stream:
        text = stream.read()
    if not text.strip():
        raise Rejected("the file has no stacks")
    rows = []
    for number, line in enumerate(text.rstrip("\n").split("\n"), start=1):
        match = LINE.match(line)
        if not match:
            raise Rejected(f"line {number} is not 'frame;frame;... COUNT': {line[:120]!r}")
        rows.append((match["stack"].split(";"), int(match["count"])))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--expect-top-frame")
    parser.add_argument("--no-speedscope", action="store_true")
    parser.add_argument("--node", default=shutil.which("node"))
    args = parser.parse_args()
    try:
        rows = read_folded(args.file)
        per_leaf = collections.Counter()
        for stack, count in rows:
            per_leaf[stack[-1]] += count
        top, weight = max(per_leaf.items(), key=lambda item: (item[1], item[0]))
        print(f"{len(rows)} stacks, total {sum(c for _, c in rows)}; top leaf: {top} {weight}")
        if args.expect_top_frame and args.expect_top_frame not in top:
            raise Rejected(f"top leaf is {top!r}, expected it to contain {args.expect_top_frame!r}")
        if args.no_speedscope:
            print("ok (text only)")
            return 0
        if not args.node:
            print("SKIP: node is not installed, so speedscope cannot import the file (--no-speedscope checks the text alone)")
            return SKIP
        checker = os.path.join(HERE, "check_speedscope.mjs")
        profile = os.path.basename(args.file)
        try:
            result = subprocess.run(
                [args.node, checker, args.file, "--input", "folded", "--expect-top-frame", top, profile],
                capture_output=True, text=True, timeout=SPEEDSCOPE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as error:
            raise Rejected(f"speedscope's import ran over {SPEEDSCOPE_TIMEOUT_S} s") from error
        lines = result.stdout.strip().splitlines() or [result.stderr.strip()]
        if result.returncode == SKIP:
            print(lines[-1])
            return SKIP
        if result.returncode != 0:
            raise Rejected(f"speedscope: {lines[-1]}")
        print("speedscope " + "; ".join(l for l in lines if l.startswith(("imported as", "top frame"))))
    except Rejected as error:
        print(f"FAIL: {error}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
