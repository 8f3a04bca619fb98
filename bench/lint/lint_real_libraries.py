#!/usr/bin/env python3
"""`gpuleak lint` on real library code, with each finding judged by a person (issue 16).

The trees are public repositories fetched outside this repository (never committed), and the
Debian torch package of this machine. Each TREE argument is `NAME=FOLDER[@REPO@COMMIT]`:
the folder is linted once with `gpuleak lint --no-config --format json`, and every finding is
looked up in the classification file (`--classes`, a JSON list of
`{"path", "rule", "code", "class", "reason"}`; `path` starts with the tree folder's own name, `code` is the
flagged line's text, stripped). A finding that the file does not classify is listed as
`unclassified`, so a new finding is never silently counted as explained.

Writes one JSON document: per tree its files, findings per 1,000 files, statements not parsed
(each checked with this Python's `ast.parse` on its file: valid code must parse), and every
finding with its class and reason; totals last.

Usage:
    python3 bench/lint/lint_real_libraries.py --gpuleak build/gpuleak \\
        --classes bench/lint/real_library_classes.json --out FILE \\
        lightning=/tmp/real/lightning/src@Lightning-AI/pytorch-lightning@7f0c343... ...
"""
import argparse
import ast
import collections
import json
import os
import subprocess
import sys
import time
import warnings


def count_files(folder):
    files = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")]
        files += sum(1 for n in names if n.endswith(".py") or n.endswith(".ipynb"))
    return files


def cpython_parses(path):
    try:
        with open(path, "rb") as f:
            source = f.read()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
        return True
    except (SyntaxError, ValueError, OSError):
        return False


def flagged_code(finding):
    for line in finding.get("frame", []):
        if line.get("line") == finding["line"]:
            return line.get("text", "").strip()
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", required=True)
    parser.add_argument("--classes", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--site-packages",
        default=None,
        help="a lint-site-packages summary (tests/gpu/lint_site_packages.py): each of "
        "its sample findings is looked for among the findings here",
    )
    parser.add_argument("trees", nargs="+", metavar="NAME=FOLDER[@REPO@COMMIT]")
    args = parser.parse_args()

    with open(args.classes, encoding="utf-8") as f:
        classes = json.load(f)
    by_key = {(c["path"], c["rule"], c["code"]): c for c in classes}

    trees = []
    totals = collections.Counter()
    by_class = collections.Counter()
    for spec in args.trees:
        name, _, rest = spec.partition("=")
        folder, _, source = rest.partition("@")
        repo, _, commit = source.partition("@")
        # Paths start with the package folder's name (`transformers/trainer.py`), as in
        # site-packages.
        base = os.path.dirname(os.path.abspath(folder).rstrip("/"))
        command = [
            args.gpuleak,
            "lint",
            "--no-config",
            "--color",
            "never",
            "--format",
            "json",
            "-j",
            str(args.jobs),
            folder,
        ]
        start = time.monotonic()
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - start
        if run.returncode not in (0, 1, 3):
            sys.exit(f"{name}: gpuleak lint exited {run.returncode}: {run.stderr.strip()[:400]}")
        report = json.loads(run.stdout)
        files = count_files(folder)
        findings = []
        for finding in report["findings"]:
            path = os.path.relpath(finding["path"], base)
            code = flagged_code(finding)
            judged = by_key.get((path, finding["rule"], code))
            entry = {
                "where": f"{path}:{finding['line']}:{finding['rule']}",
                "code": code,
                "message": finding["message"],
                "class": judged["class"] if judged else "unclassified",
                "reason": judged["reason"] if judged else "",
            }
            by_class[entry["class"]] += 1
            findings.append(entry)
        not_parsed = []
        for s in report.get("statements_not_parsed", []) + report.get("files_not_linted", []):
            path = s["path"]
            not_parsed.append(
                {
                    "where": f"{os.path.relpath(path, base)}:{s.get('line')}",
                    "message": s["message"],
                    "cpython_parses": cpython_parses(path),
                }
            )
        trees.append(
            {
                "name": name,
                "repo": repo or None,
                "commit": commit or None,
                "command": " ".join(command),
                "exit": run.returncode,
                "seconds": round(seconds, 2),
                "files": files,
                "findings": len(findings),
                "findings_per_1000_files": round(1000.0 * len(findings) / files, 3) if files else None,
                "valid_files_not_fully_parsed": [p["where"] for p in not_parsed if p["cpython_parses"]],
                "not_parsed": not_parsed,
                "finding_list": findings,
            }
        )
        totals["files"] += files
        totals["findings"] += len(findings)
        print(
            f"{name:24} {files:6} files {len(findings):4} findings " f"{len(not_parsed)} not parsed  {seconds:6.1f} s"
        )
    site = None
    if args.site_packages:
        # A finding from site-packages is reproduced when a tree here has one of the same
        # rule on the same line of code in a file whose path ends the same way
        # (pytorch_lightning/... is a copy of lightning/pytorch/...).
        with open(args.site_packages, encoding="utf-8") as f:
            summary = json.load(f)
        local = [(t["name"], e) for t in trees for e in t["finding_list"]]
        site = []
        for package in summary["packages"]:
            for sample in package.get("sample_findings", []):
                path, line, rule = sample["where"].rsplit(":", 2)
                tail = path.replace("pytorch_lightning/", "lightning/pytorch/")
                match = None
                for name, e in local:
                    lpath, _, lrule = e["where"].rsplit(":", 2)
                    if (
                        lrule == rule
                        and e["code"] == sample["code"].strip()
                        and (lpath.endswith(tail) or tail.endswith(lpath))
                    ):
                        match = (name, e)
                        break
                judged = by_key.get((path, rule, sample["code"].strip()))
                site.append(
                    {
                        "where": f"{package['package']}: {sample['where']}",
                        "code": sample["code"].strip(),
                        "reproduced_here": f"{match[0]}: {match[1]['where']}" if match else None,
                        "class": judged["class"] if judged else "unclassified",
                        "reason": judged["reason"] if judged else "",
                    }
                )
    out = {
        "about": "gpuleak lint on real library trees; every finding judged by a person "
        "(class: false_positive, real_pattern or unclassified)",
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "trees": trees,
        "totals": {
            "files": totals["files"],
            "findings": totals["findings"],
            "findings_per_1000_files": round(1000.0 * totals["findings"] / totals["files"], 3)
            if totals["files"]
            else None,
            "findings_by_class": dict(by_class),
        },
    }
    if site is not None:
        out["site_packages_findings"] = site
        out["site_packages_reproduced"] = sum(1 for x in site if x["reproduced_here"])
        out["site_packages_by_class"] = dict(collections.Counter(x["class"] for x in site))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"total {totals['files']} files, {totals['findings']} findings, by class {dict(by_class)}")


if __name__ == "__main__":
    main()
