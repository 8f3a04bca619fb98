#!/usr/bin/env python3
"""Speed and robustness of `gpuleak lint` on a large real corpus, against pylint.

Runs, in one go, on the same machine:

1. gpuleak over every .py file of the standard library (default /usr/lib/python3.11):
   wall time with one thread and with the default thread count, MB/s, peak RSS, findings,
   files it could not parse; with --baseline-gpuleak (another build, e.g. main's) the same
   runs alternate between the two binaries, and the speed ratio is reported;
2. gpuleak on each file in its own process, to count crashes per file (any exit that
   is not 0, 1 or 3, or a signal);
3. a fixed random subset of the same files (seed and size below) linted by gpuleak
   (one thread) and by Debian's pylint with its default checks (no configuration,
   one process), so the ratio compares identical input;
4. binary and random inputs, which must be refused with a message, not a crash;
5. memory: one large file made of the standard library's files, one after the other, under
   an `import torch` line (--large-mb, default 50 MB), linted alone; peak RSS (the child's
   ru_maxrss) per source byte against issue 16's bound of 20 bytes. The baseline binary gets
   a smaller file of the same kind (--baseline-large-mb, default 8 MB: older builds took up to
   224 bytes per source byte), and the new build is measured on that file too, so the
   bytes-per-byte ratio compares identical input.

The result is written as JSON (default bench/results/lint-speed.json).

Usage (from the repository root, after scripts/setup):
    python3 bench/lint/lint_speed.py [--gpuleak build/gpuleak] [--stdlib DIR]
        [--subset 120] [--seed 20240611] [--out bench/results/lint-speed.json]
        [--baseline-gpuleak /tmp/gpuleak-main] [--large-mb 50] [--baseline-large-mb 8]
"""
import argparse
import ast
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


def timed_with_rss(cmd, timeout_s=600):
    """(seconds, exit code, peak RSS in bytes, stdout) of one child, its RSS from wait4."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        deadline = start + timeout_s
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid != 0:
                break
            if time.perf_counter() > deadline:
                child.kill()
                pid, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.005)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return seconds, child.returncode, usage.ru_maxrss * 1024, out.read().decode("utf-8", "replace")


def valid_python(data):
    try:
        ast.parse(data)
        return True
    except (SyntaxError, ValueError):
        return False


def large_file(files, target_bytes, path):
    """Standard-library files one after the other under `import torch` (so the rules run),
    until target_bytes; only files this Python parses (the library keeps Python 2 test data,
    lib2to3's), so the result is one valid module. Returns the size written."""
    written = 0
    sources = []
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        if valid_python(data):
            sources.append(data)
    with open(path, "wb") as out:
        out.write(b"import torch\n")
        while written < target_bytes:
            for data in sources:
                if not data.endswith(b"\n"):
                    data += b"\n"
                out.write(data)
                written += len(data)
                if written >= target_bytes:
                    break
    return os.path.getsize(path)


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
    parser.add_argument(
        "--baseline-gpuleak",
        default=None,
        help="another gpuleak build measured in the same run (e.g. a copy of main's)",
    )
    parser.add_argument("--large-mb", type=float, default=50, help="size of the memory test file")
    parser.add_argument(
        "--baseline-large-mb", type=float, default=8, help="size of the file both builds lint for the memory ratio"
    )
    args = parser.parse_args()

    gpuleak = os.path.abspath(args.gpuleak)
    pylint = shutil.which("pylint")
    if not os.access(gpuleak, os.X_OK):
        sys.exit(f"no gpuleak binary at {gpuleak}: run scripts/setup first")
    baseline = os.path.abspath(args.baseline_gpuleak) if args.baseline_gpuleak else None
    if baseline and not os.access(baseline, os.X_OK):
        sys.exit(f"no baseline gpuleak binary at {baseline}")
    if pylint is None:
        sys.exit("pylint is not installed (apt install pylint)")
    files = python_files(args.stdlib)
    if not files:
        sys.exit(f"no .py files under {args.stdlib}")
    all_bytes = total_bytes(files)
    cores = os.cpu_count() or 1
    load_at_start = os.getloadavg()
    print(f"corpus: {args.stdlib}, {len(files)} files, {all_bytes / 1e6:.1f} MB", file=sys.stderr)

    # 1. Whole corpus, one thread and all cores (median of repeats); with a baseline
    # the two binaries alternate run by run, so a change of load hits both.
    whole = {}
    baseline_whole = {}
    binaries = [("gpuleak", gpuleak)] + ([("baseline", baseline)] if baseline else [])
    for label, jobs in (("one_thread", "1"), ("all_cores", str(cores))):
        times = {name: [] for name, _ in binaries}
        rss = {name: 0 for name, _ in binaries}
        for _ in range(args.repeats):
            for name, binary in binaries:
                seconds, code, peak, stdout = timed_with_rss(
                    gpuleak_lint(binary, ["--format", "json", "-j", jobs, args.stdlib])
                )
                if code not in (0, 1, 3):
                    sys.exit(f"{name} failed on the whole corpus (exit {code})")
                times[name].append(seconds)
                rss[name] = max(rss[name], peak)
                if name == "gpuleak":
                    report = json.loads(stdout)
        for name, _ in binaries:
            entry = {
                "jobs": int(jobs),
                "seconds_median": round(statistics.median(times[name]), 3),
                "seconds_all": [round(t, 3) for t in times[name]],
                "mb_per_s": mb_per_s(all_bytes, statistics.median(times[name])),
                "peak_rss_bytes": rss[name],
            }
            (whole if name == "gpuleak" else baseline_whole)[label] = entry
        if baseline:
            whole[label]["speed_ratio_over_baseline"] = round(
                baseline_whole[label]["seconds_median"] / whole[label]["seconds_median"], 3
            )
    whole_summary = {
        "files": report["summary"]["files"],
        "bytes": report["summary"]["bytes"],
        "findings": report["summary"]["findings"],
        "findings_by_rule": report["summary"]["by_rule"],
        "files_not_linted": len(report["files_not_linted"]),
        "not_linted": [
            {"path": os.path.relpath(f["path"], args.stdlib), "message": f["message"]}
            for f in report["files_not_linted"]
        ],
    }
    print(f"gpuleak whole corpus: {whole}", file=sys.stderr)
    if baseline:
        print(f"baseline whole corpus: {baseline_whole}", file=sys.stderr)

    # 2. One process per file: a crash is any exit other than 0, 1, 3.
    crashes = []
    for f in files:
        run = subprocess.run(
            gpuleak_lint(gpuleak, ["--format", "json", f]), capture_output=True, text=True, check=False
        )
        if run.returncode not in (0, 1, 3):
            crashes.append(
                {"path": os.path.relpath(f, args.stdlib), "exit": run.returncode, "stderr": run.stderr[-500:]}
            )
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
            bad_inputs.append(
                {"input": name, "exit": run.returncode, "message": run.stderr.strip().replace(tmp + "/", "")}
            )

    # 5. Memory on one large file: peak RSS per source byte.
    memory = {"bound_rss_bytes_per_source_byte": 20}
    with tempfile.TemporaryDirectory() as tmp:

        def measure(binary, path):
            seconds, code, peak, stdout = timed_with_rss(gpuleak_lint(binary, ["--format", "json", "-j", "1", path]))
            size = os.path.getsize(path)
            entry = {
                "bytes": size,
                "exit": code,
                "seconds": round(seconds, 3),
                "mb_per_s": mb_per_s(size, seconds),
                "peak_rss_bytes": peak,
                "rss_bytes_per_source_byte": round(peak / size, 2),
            }
            if code in (0, 1, 3):
                doc = json.loads(stdout)
                entry["findings"] = doc["summary"]["findings"]
                entry["linted"] = not doc["files_not_linted"]
                entry["statements_not_parsed"] = len(doc.get("statements_not_parsed", []))
            return entry

        big = os.path.join(tmp, "large.py")
        large_file(files, int(args.large_mb * 1e6), big)
        memory["large_file"] = measure(gpuleak, big)
        # Only a run that finished says what the file needs (a killed one stopped growing).
        memory["large_file"]["finished"] = memory["large_file"]["exit"] in (0, 1, 3)
        memory["large_file"]["within_bound"] = memory["large_file"]["finished"] and (
            memory["large_file"]["rss_bytes_per_source_byte"] <= memory["bound_rss_bytes_per_source_byte"]
        )
        print(f"large file: {memory['large_file']}", file=sys.stderr)
        if baseline:
            small = os.path.join(tmp, "baseline_large.py")
            large_file(files, int(args.baseline_large_mb * 1e6), small)
            memory["same_file_both_builds"] = {"gpuleak": measure(gpuleak, small), "baseline": measure(baseline, small)}
            both = memory["same_file_both_builds"]
            both["rss_ratio_baseline_over_gpuleak"] = round(
                both["baseline"]["peak_rss_bytes"] / both["gpuleak"]["peak_rss_bytes"], 2
            )
            both["speed_ratio_over_baseline"] = round(both["baseline"]["seconds"] / both["gpuleak"]["seconds"], 3)
            print(f"same file, both builds: {both}", file=sys.stderr)

    result = {
        "what": "gpuleak lint speed and robustness on the Python standard library, against pylint",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {
            "cpus": cores,
            "cpu": platform.processor() or platform.machine(),
            "system": platform.platform(),
            "load_average_1_5_15_at_start": [round(x, 2) for x in load_at_start],
            "load_average_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "gpuleak": {
            "binary": os.path.relpath(gpuleak, repo),
            "version": subprocess.run([gpuleak, "--version"], capture_output=True, text=True).stdout.strip(),
        },
        "baseline_gpuleak": ({"binary": baseline, "whole_corpus": baseline_whole} if baseline else None),
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
        "memory": memory,
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
    print(
        f"whole corpus: {whole['one_thread']['mb_per_s']} MB/s (1 thread), "
        f"{whole['all_cores']['mb_per_s']} MB/s ({cores} threads); "
        f"{whole_summary['files_not_linted']} files not parsed; {len(crashes)} crashes\n"
        f"subset of {s['files']} files ({s['bytes'] / 1e6:.2f} MB): gpuleak {s['gpuleak_mb_per_s']} MB/s, "
        f"pylint {s['pylint_mb_per_s']} MB/s, ratio {s['ratio_gpuleak_over_pylint']}x\n"
        f"large file ({memory['large_file']['bytes'] / 1e6:.0f} MB): peak RSS "
        f"{memory['large_file']['rss_bytes_per_source_byte']} bytes per source byte (bound 20), "
        f"{memory['large_file']['mb_per_s']} MB/s\n"
        + (
            f"against the baseline build: whole corpus {whole['one_thread']['speed_ratio_over_baseline']}x "
            f"(1 thread), {whole['all_cores']['speed_ratio_over_baseline']}x ({cores} threads) as fast; "
            f"same {args.baseline_large_mb:.0f} MB file: "
            f"{memory['same_file_both_builds']['rss_ratio_baseline_over_gpuleak']}x less memory, "
            f"{memory['same_file_both_builds']['speed_ratio_over_baseline']}x as fast\n"
            if baseline
            else ""
        )
        + f"written to {os.path.relpath(args.out, repo)}"
    )


if __name__ == "__main__":
    main()
