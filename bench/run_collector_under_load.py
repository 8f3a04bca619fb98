#!/usr/bin/env python3
"""What the collector loses when the machine is loaded.

build/bench/collector_api_pairs records allocate/free pairs through the
collector's C API at a paced rate while HOGS processes keep every core busy,
so the collector's writer thread competes for CPU with the program and with
everything else. The trace's `lost` count (gpuleak report --json) over the
events the program made is the figure, per rate, number of hogs and
per-thread buffer cap (GPULEAK_BUFFER_MB). Runs of the configurations take
turns, `--rounds` times; the median is kept.

usage: bench/run_collector_under_load.py BUILD_DIR OUT.json [--rates 1e6,4e6]
       [--hogs 0,8] [--buffers-mb 48,256] [--seconds 3] [--rounds 3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HOG = "import os\nwhile True:\n    pass\n"


def lost_fraction(build, collector, rate, seconds, buffer_mb, traces):
    pairs = int(rate * seconds)
    env = dict(os.environ, GPULEAK_TRACE_DIR=traces)
    if buffer_mb:
        env["GPULEAK_BUFFER_MB"] = str(buffer_mb)
    started = time.monotonic()
    out = subprocess.run(
        [os.path.join(build, "bench", "collector_api_pairs"), collector, str(pairs), "12", "8", str(rate)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=600,
    )
    wall = time.monotonic() - started
    result = json.loads(out.stdout.strip().splitlines()[-1])
    trace = [os.path.join(traces, f) for f in os.listdir(traces) if f.endswith(".trace")][0]
    report_path = os.path.join(traces, "report.json")
    subprocess.run(
        [os.path.join(build, "gpuleak"), "report", "--json-report", report_path, trace],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    with open(report_path) as f:
        events = json.load(f)["processes"][0]["events"]
    for name in os.listdir(traces):
        os.remove(os.path.join(traces, name))
    made = 2 * (pairs + 10000)  # and the warm-up's
    return {
        "lost": events["lost"],
        "events": made,
        "lost_fraction": events["lost"] / made,
        "achieved_pairs_per_second": pairs / (wall if wall > 0 else 1),
        "ns_per_pair": result["ns_per_pair"],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--rates", default="1e6,4e6")
    parser.add_argument("--hogs", default="0,8")
    parser.add_argument("--buffers-mb", default="48,256")
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    collector = os.path.join(args.build, "libgpuleak_collector.so")
    traces = tempfile.mkdtemp(prefix="gpuleak-under-load-")
    configs = [
        (float(r), int(h), int(b))
        for r in args.rates.split(",")
        for h in args.hogs.split(",")
        for b in args.buffers_mb.split(",")
    ]
    samples = {c: [] for c in configs}
    for _ in range(args.rounds):
        for rate, hogs, buffer_mb in configs:
            hog_processes = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
            try:
                samples[(rate, hogs, buffer_mb)].append(
                    lost_fraction(args.build, collector, rate, args.seconds, buffer_mb, traces)
                )
            finally:
                for p in hog_processes:
                    p.kill()
                    p.wait()
            s = samples[(rate, hogs, buffer_mb)][-1]
            print(
                "rate %.0e hogs %d buffer %d MiB: lost %.1f %%" % (rate, hogs, buffer_mb, 100 * s["lost_fraction"]),
                flush=True,
            )
    results = []
    for (rate, hogs, buffer_mb), runs in samples.items():
        results.append(
            {
                "pairs_per_second": rate,
                "hogs": hogs,
                "buffer_mb": buffer_mb,
                "lost_fraction": statistics.median(r["lost_fraction"] for r in runs),
                "runs": runs,
            }
        )
    shutil.rmtree(traces, ignore_errors=True)
    report = {
        "what": "fraction of events the collector dropped at a paced event rate while HOGS "
        "busy processes load every core, per per-thread buffer cap (GPULEAK_BUFFER_MB)",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
