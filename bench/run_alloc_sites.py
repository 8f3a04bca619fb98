#!/usr/bin/env python3
"""The stream-ordered allocation pair from several call sites, on the GPU machine.

bench/cuda/alloc_pairs with SITES call sites taking turns through one
allocating function (the shape that made remembered stacks fall off a cliff:
every capture starts at one place). For each number of sites, in separate
processes taking turns:
  native     alloc_pairs alone
  in-process alloc_pairs under the collector with GPULEAK_BENCH_IN_PROCESS=1:
             rounds of CUPTI's callbacks off, on but empty, and recording, in
             one process (the same machine state), once with remembered stacks
             (the default) and once unwinding every stack (GPULEAK_REUSE_STACKS=0)
The figure is recording over callbacks off in the same process, per number of
sites; native processes give the absolute time for reference.

usage: bench/run_alloc_sites.py ALLOC_PAIRS COLLECTOR OUT.json [--sites 1,8,48] [--processes 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(argv, env):
    out = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env), timeout=120
    )
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no result from %s (exit %d): %s" % (argv, out.returncode, out.stderr[-400:]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("alloc_pairs")
    parser.add_argument("collector")
    parser.add_argument("out")
    parser.add_argument("--sites", default="1,8,48")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pairs", type=int, default=20000)
    args = parser.parse_args()
    traces = tempfile.mkdtemp(prefix="gpuleak-alloc-sites-")
    results = {}
    errors = []
    for sites in [int(s) for s in args.sites.split(",")]:
        argv = [args.alloc_pairs, str(args.rounds), str(args.pairs), "300", str(sites)]
        row = {"native_async_us": [], "reuse": [], "no_reuse": []}
        for p in range(args.processes):
            for name, env in (
                ("native", {}),
                (
                    "reuse",
                    {
                        "CUDA_INJECTION64_PATH": args.collector,
                        "GPULEAK_BENCH_IN_PROCESS": "1",
                        "GPULEAK_TRACE_DIR": traces,
                    },
                ),
                (
                    "no_reuse",
                    {
                        "CUDA_INJECTION64_PATH": args.collector,
                        "GPULEAK_BENCH_IN_PROCESS": "1",
                        "GPULEAK_TRACE_DIR": traces,
                        "GPULEAK_REUSE_STACKS": "0",
                    },
                ),
            ):
                try:
                    result = run(argv, env)
                except Exception as error:
                    errors.append("%d sites %s: %s" % (sites, name, error))
                    continue
                if name == "native":
                    row["native_async_us"].append(result["async_pair_us"])
                else:
                    a = result["async_median_us"]
                    s = result["sync_median_us"]
                    row[name].append(
                        {
                            "async_recording_over_off": a["recording"] / a["callbacks_off"],
                            "async_empty_over_off": a["empty_callbacks"] / a["callbacks_off"],
                            "sync_recording_over_off": s["recording"] / s["callbacks_off"],
                            "async_us": a,
                            "sync_us": s,
                        }
                    )
            for f in os.listdir(traces):
                os.remove(os.path.join(traces, f))
        summary = {
            "native_async_pair_us": statistics.median(row["native_async_us"]) if row["native_async_us"] else None
        }
        for name in ("reuse", "no_reuse"):
            if row[name]:
                summary[name + "_async_ratio"] = round(
                    statistics.median(r["async_recording_over_off"] for r in row[name]), 3
                )
                summary[name + "_sync_ratio"] = round(
                    statistics.median(r["sync_recording_over_off"] for r in row[name]), 3
                )
        summary["processes"] = row
        results[str(sites)] = summary
        print(
            "%2d sites: async recording/off %s with reuse, %s without; sync %s"
            % (
                sites,
                summary.get("reuse_async_ratio"),
                summary.get("no_reuse_async_ratio"),
                summary.get("reuse_sync_ratio"),
            ),
            flush=True,
        )
    # Remembered stacks must stay a win (or at worst even) for any number of sites.
    verdict = {}
    for sites, summary in results.items():
        if "reuse_async_ratio" in summary and "no_reuse_async_ratio" in summary:
            verdict["reuse_not_slower_at_%s_sites" % sites] = (
                summary["reuse_async_ratio"] <= summary["no_reuse_async_ratio"] * 1.02
            )
    report = {
        "what": "1 MiB stream-ordered (and synchronous) pair from SITES call sites in turn: "
        "recording over CUPTI callbacks off in the same process, with and without "
        "remembered stacks; native processes for the absolute time",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "results": results,
        "remembered_stacks_win": verdict,
        "errors": errors,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
