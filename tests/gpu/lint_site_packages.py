#!/usr/bin/env python3
"""`gpuleak lint` on installed packages that have no leaks of the kind it looks for (issue 16).

For each package (torch, torchvision, transformers, lightning, pytorch_lightning, accelerate,
timm by default) it finds the installed folder without importing the package, lints it once with
`gpuleak lint --no-config --format json -j N`, under a timeout, and records:

- files, bytes, wall seconds, MB/s, peak RSS (the child's ru_maxrss) and RSS per source byte;
- findings per rule, findings per 1,000 files against issue 16's bound of 1, and a sample of
  findings as `path:line:rule` with the message and the flagged line, so a person can judge
  each one (findings in code without leaks are false positives unless the person says why not);
- files not linted and statements not parsed, each checked with this Python's own parser
  (`ast.parse`): one that CPython parses is valid code gpuleak failed on, which issue 16 forbids;
- crashes: an exit other than 0, 1, 3, a signal or the timeout.

Writes OUT/summary.json (totals, per package, the bounds and whether they hold) and
OUT/findings.json (every finding, at most 300 per package). Prints a short table.

Usage:
    python3 tests/gpu/lint_site_packages.py --gpuleak dist/gpuleak --out RESULTS
        [--packages torch,timm] [--jobs 16] [--timeout 150] [--sample 25]
"""
import argparse
import ast
import collections
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings

DEFAULT_PACKAGES = ["torch", "torchvision", "transformers", "lightning", "pytorch_lightning", "accelerate", "timm"]
BOUND_FINDINGS_PER_1000_FILES = 1.0
# Lightning installs as `lightning` (which holds `lightning.pytorch`) or as `pytorch_lightning`;
# either one counts as Lightning found.
SAME_PROJECT = {"lightning": "pytorch_lightning", "pytorch_lightning": "lightning"}


def package_folder(name):
    """The installed folder of a top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def package_version(name):
    try:
        from importlib import metadata

        for dist in (name, name.replace("_", "-")):
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    except Exception:  # noqa: BLE001 - a version is information, not a requirement
        pass
    return None


def run_with_rss(cmd, timeout_s):
    """(seconds, exit code or None on timeout, peak RSS bytes, stdout text, stderr tail)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        child = subprocess.Popen(cmd, stdout=out, stderr=err)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid != 0:
                break
            if time.monotonic() - start > timeout_s:
                child.kill()
                pid, status, usage = os.wait4(child.pid, 0)
                timed_out = True
                break
            time.sleep(0.02)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        code = None if timed_out else os.waitstatus_to_exitcode(status)
        return (
            seconds,
            code,
            usage.ru_maxrss * 1024,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace")[-3000:],
        )


def cpython_parses(path):
    """Whether this interpreter's parser accepts the file (None: it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(source, filename=path)
            return True
        except (SyntaxError, ValueError):
            return False


def flagged_line(finding):
    for entry in finding.get("frame", []):
        if entry.get("line") == finding["line"]:
            return entry.get("text", "").strip()[:160]
    return ""


def lint_package(gpuleak, name, folder, jobs, timeout_s, sample_size):
    cmd = [gpuleak, "lint", "--no-config", "--color", "never", "--format", "json", "-j", str(jobs), folder]
    seconds, code, rss, stdout, stderr = run_with_rss(cmd, timeout_s)
    entry = {
        "package": name,
        "version": package_version(name),
        "folder": folder,
        "command": " ".join(cmd),
        "exit": code,
        "timed_out": code is None,
        "seconds": round(seconds, 2),
        "peak_rss_bytes": rss,
    }
    crashed = code is None or code not in (0, 1, 3)
    entry["crashed"] = crashed
    if crashed:
        entry["stderr_tail"] = stderr
        return entry, []
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError as error:
        entry.update({"crashed": True, "error": f"output is not JSON: {error}", "stderr_tail": stderr})
        return entry, []
    summary = doc["summary"]
    files = summary["files"]
    nbytes = summary["bytes"]
    findings = doc["findings"]
    entry.update(
        {
            "files": files,
            "bytes": nbytes,
            "mb_per_s": round(nbytes / 1e6 / seconds, 2) if seconds > 0 else None,
            "rss_bytes_per_source_byte": round(rss / nbytes, 2) if nbytes else None,
            "findings": len(findings),
            "findings_per_1000_files": round(1000 * len(findings) / files, 3) if files else 0.0,
            "findings_by_rule": dict(sorted(collections.Counter(f["rule"] for f in findings).items())),
            "suppressed": summary.get("suppressed", 0),
        }
    )

    def rel(path):
        return os.path.relpath(path, os.path.dirname(folder))

    entry["sample_findings"] = [
        {"where": f"{rel(f['path'])}:{f['line']}:{f['rule']}", "message": f["message"][:300], "code": flagged_line(f)}
        for f in findings[:sample_size]
    ]
    # Files gpuleak did not lint and statements it did not parse, checked against CPython.
    not_linted = []
    for problem in doc.get("files_not_linted", []):
        not_linted.append(
            {
                "where": f"{rel(problem['path'])}:{problem.get('line') or 0}",
                "message": problem["message"][:200],
                "cpython_parses": cpython_parses(problem["path"]),
            }
        )
    not_parsed = []
    for problem in doc.get("statements_not_parsed", []):
        not_parsed.append(
            {
                "where": f"{rel(problem['path'])}:{problem.get('line')}",
                "message": problem["message"][:200],
                "cpython_parses": cpython_parses(problem["path"]),
            }
        )
    entry["files_not_linted"] = len(not_linted)
    entry["statements_not_parsed"] = len(not_parsed)
    entry["valid_files_not_fully_parsed"] = sorted(
        {p["where"].rsplit(":", 1)[0] for p in not_linted + not_parsed if p["cpython_parses"]}
    )
    entry["not_linted_sample"] = not_linted[:20]
    entry["not_parsed_sample"] = not_parsed[:20]
    full = [
        {
            "where": f"{rel(f['path'])}:{f['line']}:{f['rule']}",
            "message": f["message"],
            "fix": f["fix"],
            "code": flagged_line(f),
        }
        for f in findings[:300]
    ]
    return entry, full


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--packages", default=",".join(DEFAULT_PACKAGES))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=150, help="seconds per package")
    parser.add_argument("--sample", type=int, default=25, help="findings listed per package")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpuleak = os.path.abspath(args.gpuleak)

    packages, missing, seen = [], [], set()
    for name in [p for p in args.packages.split(",") if p]:
        folder = package_folder(name)
        if folder is None:
            missing.append(name)
        elif folder not in seen:
            seen.add(folder)
            packages.append((name, folder))

    found_names = {name for name, _ in packages}
    missing = [m for m in missing if SAME_PROJECT.get(m) not in found_names]

    results, all_findings = [], {}
    for name, folder in packages:
        entry, full = lint_package(gpuleak, name, folder, args.jobs, args.timeout, args.sample)
        results.append(entry)
        all_findings[name] = full
        print(
            f"{name}: {entry.get('files', '?')} files, {entry['seconds']} s, "
            f"{entry.get('findings', '?')} findings, exit {entry['exit']}",
            file=sys.stderr,
        )

    linted = [r for r in results if not r["crashed"]]
    files = sum(r["files"] for r in linted)
    nbytes = sum(r["bytes"] for r in linted)
    findings = sum(r["findings"] for r in linted)
    by_rule = collections.Counter()
    for r in linted:
        by_rule.update(r["findings_by_rule"])
    valid_not_parsed = [f"{r['package']}: {w}" for r in linted for w in r["valid_files_not_fully_parsed"]]
    per_1000 = round(1000 * findings / files, 3) if files else None
    checks = {
        "every_package_found": not missing,
        "no_crash_or_timeout": all(not r["crashed"] for r in results),
        "findings_per_1000_files_at_most_1": per_1000 is not None and per_1000 <= BOUND_FINDINGS_PER_1000_FILES,
        "every_valid_file_parsed": not valid_not_parsed,
    }
    summary = {
        "suite": "lint-site-packages",
        "about": (
            "gpuleak lint on installed packages without leaks of the kinds it looks for "
            "(issue 16). Every finding here is a false positive unless a person reading "
            "sample_findings (or findings.json) finds a real leak; the bound is at most 1 "
            "finding per 1,000 files, each explained. valid_files_not_fully_parsed lists files "
            "this machine's CPython parses but gpuleak did not parse in full (must be empty). "
            "peak_rss_bytes is the whole run's, all threads."
        ),
        "ok": all(checks.values()),
        "checks": checks,
        "python": platform.python_version(),
        "jobs": args.jobs,
        "packages_missing": missing,
        "totals": {
            "files": files,
            "bytes": nbytes,
            "seconds": round(sum(r["seconds"] for r in results), 2),
            "findings": findings,
            "findings_per_1000_files": per_1000,
            "findings_by_rule": dict(sorted(by_rule.items())),
            "peak_rss_bytes_max": max((r["peak_rss_bytes"] for r in results), default=0),
            "valid_files_not_fully_parsed": valid_not_parsed,
        },
        "packages": results,
        "command": "python3 tests/gpu/lint_site_packages.py " + " ".join(sys.argv[1:]),
    }
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(args.out, "findings.json"), "w", encoding="utf-8") as fh:
        json.dump(all_findings, fh, indent=2)
        fh.write("\n")

    print(
        f"{'package':<18} {'files':>6} {'MB':>7} {'s':>6} {'RSS MB':>7} {'B/B':>6} "
        f"{'find':>5} {'/1k':>6} {'unparsed':>8}  rules"
    )
    for r in results:
        if r["crashed"]:
            print(f"{r['package']:<18} CRASHED or timed out: exit {r['exit']}")
            continue
        print(
            f"{r['package']:<18} {r['files']:>6} {r['bytes'] / 1e6:>7.1f} {r['seconds']:>6.1f} "
            f"{r['peak_rss_bytes'] / 2**20:>7.0f} {r['rss_bytes_per_source_byte']:>6.1f} "
            f"{r['findings']:>5} {r['findings_per_1000_files']:>6.2f} "
            f"{r['files_not_linted'] + r['statements_not_parsed']:>8}  "
            f"{' '.join(f'{k}:{v}' for k, v in r['findings_by_rule'].items())}"
        )
    print(
        f"total: {files} files, {findings} findings ({per_1000} per 1,000 files, bound 1); "
        f"valid files not fully parsed: {len(valid_not_parsed)}; missing: {missing or 'none'}; "
        f"ok: {summary['ok']}"
    )
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
