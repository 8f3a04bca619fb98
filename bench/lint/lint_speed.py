#!/usr/bin/env python3
"""Speed and robustness of `gpuleak lint` on a large real corpus, against pylint.

Runs, in one go, on the same machine:

1. gpuleak over every .py file of the standard library (default /usr/lib/python3.11):
   wall time with one thread and with the default thread count, MB/s, findings, files
   it could not parse;
2. gpuleak on each file in its own process, to count crashes per file (any exit that
   is not 0, 1 or 3, or a signal);
3. a fixed random subset of the same files (seed and size below) linted by gpuleak
   (one thread) and by Debian's pylint with its default checks (no configuration,
   one process), so the ratio compares identical input;
4. binary and random inputs, which must be refused with a message, not a crash.

The result is written as JSON (default bench/results/lint-speed.json).

Usage (from the repository root, after scripts/setup):
    python3 bench/lint/lint_speed.py [--gpuleak build/gpuleak] [--stdlib DIR]
        [--subset 120] [--seed 20240611] [--out bench/results/lint-speed.json]
"""
import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def python_files(root):
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        out.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith(".py"))
    return out


def total_bytes(files):
    return sum(os.path.getsize(f) for f in files)


def timed(cmd, **kwargs):
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    return time.perf_counter() - start, run


def mb_per_s(nbytes, seconds):
    return round(nbytes / 1e6 / seconds, 3) if seconds > 0 else None


def gpuleak_lint(gpuleak, args):
    return [gpuleak, "lint", "--no-config", "--color", "never", *args]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", default=os.path.join(repo, "build", "gpuleak"))
    parser.add_argument("--stdlib", default="/usr/lib/python3.11")
    parser.add_argument("--subset", type=int, default=120, help="files for the pylint comparison")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--repeats", type=int, default=5, help="gpuleak runs per timing (median)")
    parser.add_argument("--out", default=os.path.join(repo, "bench", "results", "lint-speed.json"))
    args = parser.parse_args()

    gpuleak = os.path.abspath(args.gpuleak)
    pylint = shutil.which("pylint")
    if not os.access(gpuleak, os.X_OK):
        sys.exit(f"no gpuleak binary at {gpuleak}: run scripts/setup first")
    if pylint is None:
        sys.exit("pylint is not installed (apt install pylint)")
    files = python_files(args.stdlib)
    if not files:
        sys.exit(f"no .py files under {args.stdlib}")
    all_bytes = total_bytes(files)
    cores = os.cpu_count() or 1
    load_at_start = os.getloadavg()
    print(f"corpus: {args.stdlib}, {len(files)} files, {all_bytes / 1e6:.1f} MB", file=sys.stderr)

    # 1. Whole corpus, one thread and all cores (median of repeats).
    whole = {}
    for label, jobs in (("one_thread", "1"), ("all_cores", str(cores))):
        times = []
        for _ in range(args.repeats):
            seconds, run = timed(gpuleak_lint(gpuleak, ["--format", "json", "-j", jobs, args.stdlib]))
            if run.returncode not in (0, 1, 3):
                sys.exit(f"gpuleak failed on the whole corpus (exit {run.returncode}): {run.stderr[-2000:]}")
            times.append(seconds)
        report = json.loads(run.stdout)
        whole[label] = {
            "jobs": int(jobs),
            "seconds_median": round(statistics.median(times), 3),
            "seconds_all": [round(t, 3) for t in times],
            "mb_per_s": mb_per_s(report["summary"]["bytes"], statistics.median(times)),
        }
    whole_summary = {
        "files": report["summary"]["files"],
        "bytes": report["summary"]["bytes"],
        "findings": report["summary"]["findings"],
        "findings_by_rule": report["summary"]["by_rule"],
        "files_not_linted": len(report["files_not_linted"]),
        "not_linted": [{"path": os.path.relpath(f["path"], args.stdlib), "message": f["message"]}
                       for f in report["files_not_linted"]],
    }
    print(f"gpuleak whole corpus: {whole}", file=sys.stderr)

    # 2. One process per file: a crash is any exit other than 0, 1, 3.
    crashes = []
    for f in files:
        run = subprocess.run(gpuleak_lint(gpuleak, ["--format", "json", f]),
                             capture_output=True, text=True, check=False)
        if run.returncode not in (0, 1, 3):
            crashes.append({"path": os.path.relpath(f, args.stdlib), "exit": run.returncode,
                            "stderr": run.stderr[-500:]})
    print(f"per-file runs: {len(files)}, crashes: {len(crashes)}", file=sys.stderr)

    # 3. The same fixed random subset for gpuleak and pylint.
    subset = sorted(random.Random(args.seed).sample(files, min(args.subset, len(files))))
    subset_bytes = total_bytes(subset)
    gl_times = []
    for _ in range(args.repeats):
        seconds, run = timed(gpuleak_lint(gpuleak, ["-j", "1", *subset]))
        gl_times.append(seconds)
    gl_seconds = statistics.median(gl_times)
    with tempfile.TemporaryDirectory() as empty:
        # No configuration anywhere pylint looks: its default checks.
        pylint_cmd = [pylint, "--rcfile=/dev/null", "--persistent=n", "--jobs=1", *subset]
        pl_seconds, pl_run = timed(pylint_cmd, cwd=empty)
    pylint_crashed = pl_run.returncode >= 32  # pylint's "usage error"/fatal bit
    print(f"subset: gpuleak {gl_seconds:.3f} s, pylint {pl_seconds:.1f} s", file=sys.stderr)

    # 4. Binary and random input.
    bad_inputs = []
    with tempfile.TemporaryDirectory() as tmp:
        rng = random.Random(args.seed)
        samples = {
            "elf_header.py": b"\x7fELF\x02\x01\x01\x00" + bytes(rng.randrange(256) for _ in range(4096)),
            "random_bytes.py": bytes(rng.randrange(256) for _ in range(65536)),
            "latin1_without_coding.py": "name = 'café'\n".encode("latin-1"),
            "truncated.ipynb": b'{"cells": [{"cell_type": "code", "source": ["x = (',
        }
        for name, data in samples.items():
            path = os.path.join(tmp, name)
            with open(path, "wb") as fh:
                fh.write(data)
            run = subprocess.run(gpuleak_lint(gpuleak, [path]), capture_output=True, text=True, check=False)
            bad_inputs.append({"input": name, "exit": run.returncode,
                               "message": run.stderr.strip().replace(tmp + "/", "")})

    result = {
        "what": "gpuleak lint speed and robustness on the Python standard library, against pylint",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": cores, "cpu": platform.processor() or platform.machine(),
                    "system": platform.platform(),
                    "load_average_1_5_15_at_start": [round(x, 2) for x in load_at_start],
                    "load_average_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()]},
        "gpuleak": {"binary": os.path.relpath(gpuleak, repo),
                    "version": subprocess.run([gpuleak, "--version"], capture_output=True,
                                              text=True).stdout.strip()},
        "pylint": subprocess.run([pylint, "--version"], capture_output=True, text=True).stdout.split("\n")[0],
        "corpus": {"root": args.stdlib, "files": len(files), "bytes": all_bytes},
        "whole_corpus": {**whole, **whole_summary},
        "crashes": {"per_file_runs": len(files), "count": len(crashes), "files": crashes},
        "subset": {
            "seed": args.seed,
            "files": len(subset),
            "bytes": subset_bytes,
            "gpuleak_seconds_median": round(gl_seconds, 3),
            "gpuleak_mb_per_s": mb_per_s(subset_bytes, gl_seconds),
            "pylint_seconds": round(pl_seconds, 3),
            "pylint_mb_per_s": mb_per_s(subset_bytes, pl_seconds),
            "pylint_exit": pl_run.returncode,
            "pylint_fatal": pylint_crashed,
            "ratio_gpuleak_over_pylint": round(pl_seconds / gl_seconds, 1),
            "file_list": [os.path.relpath(f, args.stdlib) for f in subset],
        },
        "bad_inputs": bad_inputs,
        "commands": {
            "benchmark": "python3 bench/lint/lint_speed.py " + " ".join(sys.argv[1:]),
            "gpuleak_whole": " ".join(gpuleak_lint("gpuleak", ["--format", "json", "-j", "N", args.stdlib])),
            "gpuleak_subset": "gpuleak lint --no-config --color never -j 1 <subset files>",
            "pylint_subset": "pylint --rcfile=/dev/null --persistent=n --jobs=1 <subset files> (in an empty folder)",
        },
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    s = result["subset"]
    print(f"whole corpus: {whole['one_thread']['mb_per_s']} MB/s (1 thread), "
          f"{whole['all_cores']['mb_per_s']} MB/s ({cores} threads); "
          f"{whole_summary['files_not_linted']} files not parsed; {len(crashes)} crashes\n"
          f"subset of {s['files']} files ({s['bytes'] / 1e6:.2f} MB): gpuleak {s['gpuleak_mb_per_s']} MB/s, "
          f"pylint {s['pylint_mb_per_s']} MB/s, ratio {s['ratio_gpuleak_over_pylint']}x\n"
          f"written to {os.path.relpath(args.out, repo)}")


if __name__ == "__main__":
    main()
