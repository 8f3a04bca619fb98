#!/usr/bin/env python3
"""How `gpuleak lint` agrees with examples/torch, a labelled leak corpus written
independently of the linter (for `gpuleak run`): each leak script marks its leaking line
with `# LEAK:`, each control must show no leak at run time.

For each leak: is there a finding on the marked line (and which rule)? For each control:
which findings, if any, and are they about leaks or only the folklore/correctness rules
(GL502 empty_cache, GL503 zero_grad), which a control may rightly trigger? Leaks that no
static review can see (a CUDA extension calling cudaMalloc) are listed as such.

Usage (from the repository root):
    python3 bench/lint/torch_examples_agreement.py [--gpuleak build/gpuleak]
        [--out bench/results/lint-torch-examples.json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

# Rules whose findings say "not a leak" (folklore or correctness), which a
# control script may legitimately trigger.
NOT_A_LEAK = {"GL501", "GL502", "GL503"}
# Causes no source-level review can see.
INVISIBLE = {"non-tensor-driver-allocations"}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", default=os.path.join(repo, "build", "gpuleak"))
    parser.add_argument("--examples", default=os.path.join(repo, "examples", "torch"))
    parser.add_argument("--out", default=os.path.join(repo, "bench", "results", "lint-torch-examples.json"))
    args = parser.parse_args()

    with open(os.path.join(args.examples, "corpus.json"), encoding="utf-8") as fh:
        corpus = json.load(fh)
    run = subprocess.run(
        [args.gpuleak, "lint", "--no-config", "--format", "json", args.examples],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode not in (0, 1, 3):
        sys.exit(f"gpuleak failed (exit {run.returncode}): {run.stderr}")
    report = json.loads(run.stdout)
    by_file = {}
    for f in report["findings"]:
        by_file.setdefault(os.path.basename(f["path"]), []).append(
            {"rule": f["rule"], "line": f["line"], "message": f["message"]}
        )

    cases = []
    leaks_visible = leaks_found = controls_clean = controls = 0
    for case in corpus["cases"]:
        findings = by_file.get(case["script"], [])
        entry = {
            "script": case["script"],
            "kind": case["kind"],
            "covers": case["covers"],
            "findings": [{"rule": f["rule"], "line": f["line"]} for f in findings],
        }
        if case["kind"] == "leak":
            marked = int(case["marked_line"].rsplit(":", 1)[1]) if case.get("marked_line") else None
            visible = case["expected"].get("cause") not in INVISIBLE
            hit = [f["rule"] for f in findings if f["line"] == marked]
            entry.update(
                {
                    "marked_line": marked,
                    "visible_to_static_review": visible,
                    "found_on_marked_line": bool(hit),
                    "rules_on_marked_line": hit,
                }
            )
            if visible:
                leaks_visible += 1
                leaks_found += bool(hit)
        else:
            controls += 1
            leak_findings = [f for f in findings if f["rule"] not in NOT_A_LEAK]
            entry["leak_findings"] = len(leak_findings)
            controls_clean += not leak_findings
        cases.append(entry)

    result = {
        "what": "gpuleak lint findings against the labelled scripts of examples/torch",
        "date": time.strftime("%Y-%m-%d"),
        "command": f"gpuleak lint --no-config --format json {os.path.relpath(args.examples, repo)}",
        "leaks_visible_to_static_review": leaks_visible,
        "leaks_found_on_marked_line": leaks_found,
        "leaks_invisible": [c["script"] for c in cases if c["kind"] == "leak" and not c["visible_to_static_review"]],
        "controls": controls,
        "controls_without_leak_findings": controls_clean,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    print(
        f"leaks found on their marked line: {leaks_found}/{leaks_visible} "
        f"(+{len(result['leaks_invisible'])} not visible to static review); "
        f"controls without leak findings: {controls_clean}/{controls}"
    )


if __name__ == "__main__":
    main()
