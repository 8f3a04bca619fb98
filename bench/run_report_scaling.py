#!/usr/bin/env python3
"""Times `gpuleak report --json` on synthetic traces of 1M, 10M and 100M events.

Three shapes (bench/cpu/trace_shapes.cpp): `steady` (nothing grows),
`growing` (one 4 KiB tensor kept every step), `lossy` (a fifth of the events
dropped, as a loaded collector drops them, with their ranges); and, on
request, `lossy-fresh` (lossy from an allocator that never reuses an address:
the worst case for the live set). Each trace is written once by
build/bench/trace_shapes, then reported `--rounds` times; the report's wall
time and peak resident memory (wait4's ru_maxrss) are kept, the median of
the rounds is the figure, CPU time (user + system, what the machine's load
changes least) beside wall time. The machine may be shared: each round
keeps the 1-minute load average before and after it. The growth law is the
exponent k of time ~ events^k (and of memory) between consecutive sizes:
1.0 is linear.

usage: bench/run_report_scaling.py BUILD_DIR OUT.json [--sizes 1e6,1e7,1e8]
       [--shapes steady,growing,lossy] [--rounds 1] [--work DIR] [--keep]
"""

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_wait4(argv):
    """Runs argv with wait4, so the child's own peak memory is known."""
    begin = time.monotonic()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execv(argv[0], argv)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - begin
    return (os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)


def commit():
    """The checkout's commit, marked when its tracked files differ from it."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(
            ["git", "-C", here, "rev-parse", "--short", "HEAD"], check=True, stdout=subprocess.PIPE, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (" (with uncommitted changes)" if dirty else "")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def exponent(a, b, key):
    if a[key] <= 0 or b[key] <= 0 or a["events"] == b["events"]:
        return None
    return round(math.log(b[key] / a[key]) / math.log(b["events"] / a["events"]), 3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--sizes", default="1e6,1e7,1e8")
    parser.add_argument("--shapes", default="steady,growing,lossy")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--work", default=None, help="folder for the traces (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the traces")
    parser.add_argument("--shapes-tool", default=None, help="the trace writer (default BUILD/bench/trace_shapes)")
    parser.add_argument("--gpuleak", default=None, help="the gpuleak to time (default BUILD/gpuleak)")
    args = parser.parse_args()

    load_before = os.getloadavg()
    gpuleak = args.gpuleak or os.path.join(args.build, "gpuleak")
    shapes_tool = args.shapes_tool or os.path.join(args.build, "bench", "trace_shapes")
    work = args.work or tempfile.mkdtemp(prefix="gpuleak-scaling-")
    os.makedirs(work, exist_ok=True)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    results = []
    for shape in args.shapes.split(","):
        for events in sizes:
            trace = os.path.join(work, "%s-%d.trace" % (shape, events))
            if not os.path.exists(trace):
                begin = time.monotonic()
                made = subprocess.run(
                    [shapes_tool, shape, str(events), trace], check=True, stdout=subprocess.PIPE, text=True
                )
                facts = json.loads(made.stdout)
                facts["write_seconds"] = round(time.monotonic() - begin, 2)
                with open(trace + ".json", "w") as f:
                    json.dump(facts, f)
            with open(trace + ".json") as f:
                facts = json.load(f)
            rounds = []
            for _ in range(args.rounds):
                load_before_round = os.getloadavg()[0]
                status, seconds, rss, cpu = run_wait4([gpuleak, "report", "--json", trace])
                rounds.append(
                    {
                        "exit": status,
                        "seconds": round(seconds, 3),
                        "cpu_seconds": round(cpu, 3),
                        "peak_rss_bytes": rss,
                        "load_1min": [round(load_before_round, 2), round(os.getloadavg()[0], 2)],
                    }
                )
            row = {
                "shape": shape,
                "events": facts["events"],
                "steps": facts["steps"],
                "lost": facts["lost"],
                "trace_bytes": os.path.getsize(trace),
                "seconds": statistics.median(r["seconds"] for r in rounds),
                "cpu_seconds": statistics.median(r["cpu_seconds"] for r in rounds),
                "peak_rss_bytes": statistics.median(r["peak_rss_bytes"] for r in rounds),
                "rounds": rounds,
            }
            row["cpu_ns_per_event"] = round(row["cpu_seconds"] * 1e9 / row["events"], 1)
            results.append(row)
            print(
                "%-11s %11d events  %7.2f s (cpu %7.2f s)  %6.0f MiB  (%s; load %s)"
                % (
                    shape,
                    row["events"],
                    row["seconds"],
                    row["cpu_seconds"],
                    row["peak_rss_bytes"] / 2**20,
                    ", ".join("exit %d" % r["exit"] for r in rounds),
                    ", ".join("%.1f-%.1f" % tuple(r["load_1min"]) for r in rounds),
                ),
                flush=True,
            )
    laws = {}
    for shape in args.shapes.split(","):
        rows = [r for r in results if r["shape"] == shape]
        laws[shape] = [
            {
                "from_events": a["events"],
                "to_events": b["events"],
                "time_exponent": exponent(a, b, "seconds"),
                "cpu_time_exponent": exponent(a, b, "cpu_seconds"),
                "memory_exponent": exponent(a, b, "peak_rss_bytes"),
            }
            for a, b in zip(rows, rows[1:])
        ]
    report = {
        "what": "gpuleak report --json on synthetic traces (bench/cpu/trace_shapes.cpp): wall time "
        "and peak RSS per size and shape; growth law: exponent k of time ~ events^k",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "gpuleak": gpuleak,
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": cpu_model(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        "commit": commit(),
        "results": results,
        "growth_law": laws,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
