#!/usr/bin/env python3
"""The stream-ordered allocation pair under `gpuleak run`, against native, on the GPU machine.

bench/cuda/alloc_pairs (1 MiB cudaMallocAsync+cudaFreeAsync pairs, and cudaMalloc+cudaFree
pairs) with SITES call sites taking turns through one allocating function, each run a fresh
process, in these configurations:

  native                    alloc_pairs alone
  gpuleak                   `gpuleak run -q` (the default: the preloaded interposer, native stacks)
  gpuleak_no_native_stacks  the same with GPULEAK_NATIVE_DEPTH=0
  compute_sanitizer         compute-sanitizer --tool memcheck --leak-check full (fewer pairs: it is
                            about 9x slower)
  native_again              alloc_pairs alone once more: the A/A control. Its round ratios are the
                            benchmark's own noise from one process to the next; a spread of
                            gpuleak's ratios no wider than this one is the floor, not the collector.
  gpuleak_in_process        `gpuleak run` with GPULEAK_BENCH_IN_PROCESS=1: one process times the
                            pair with the interposer's wrappers only forwarding, with hooks that
                            return at once, and recording, in turns (alloc_pairs.cu). Its ratios
                            (recording / wrappers only) carry no process-to-process noise.
  skip_PART                 (with --breakdown-sites N, at N sites only) `gpuleak run` with
                            GPULEAK_BENCH_SKIP=PART: what one part of the per-event work costs.

The breakdown in one process (--breakdown-sites N): each configuration below is one process
that times wrappers only and recording in turns, so its ratio carries no process-to-process
noise. Taking one part away at a time (without_PART) hides a cost that is spread over the
parts; taking all away and adding one back (only_PART) and taking the frames away too
(no_parts_no_frames: what is left is the hook's own path) show where the floor is:

  without_PART        GPULEAK_BENCH_SKIP=PART
  only_PART           GPULEAK_BENCH_SKIP=every part but PART
  no_parts            GPULEAK_BENCH_SKIP=every part (frames are still taken)
  no_frames           GPULEAK_NATIVE_DEPTH=0 (every part on)
  no_parts_no_frames  both

--in-process-only runs only the in-process comparisons (no fresh-process configurations).

Every process runs pinned to the CPUs of --cpus (default: the first four this process may use),
so that no round pays for a migration the other configurations did not.

Each round runs every configuration once for every number of sites, in an order that turns
from round to round. A round's ratio is a configuration's time over native's of the same
round and sites; the figures are medians, the median of round ratios and their
inter-quartile range (the spread issue 32 bounds at 0.15). `--seconds` stops starting rounds
once that much time has passed (the rounds done are kept).

usage: bench/run_async_pair_overhead.py ALLOC_PAIRS GPULEAK OUT.json [--rounds 8]
       [--sites 1,8,48] [--seconds 330] [--breakdown-sites 8] [--in-process-only] [--cpus 2,3,4,5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_RATIO = 1.2
TARGET_IQR = 0.15
BREAKDOWN_PARTS = ("seq", "clock", "device", "stack_id", "buffer")


def breakdown_configs():
    """The in-process breakdown's configurations: name -> the environment they add."""
    every = ",".join(BREAKDOWN_PARTS)
    configs = {"without_" + part: {"GPULEAK_BENCH_SKIP": part} for part in BREAKDOWN_PARTS}
    for part in BREAKDOWN_PARTS:
        configs["only_" + part] = {"GPULEAK_BENCH_SKIP": ",".join(p for p in BREAKDOWN_PARTS if p != part)}
    configs["no_parts"] = {"GPULEAK_BENCH_SKIP": every}
    configs["no_frames"] = {"GPULEAK_NATIVE_DEPTH": "0"}
    configs["no_parts_no_frames"] = {"GPULEAK_BENCH_SKIP": every, "GPULEAK_NATIVE_DEPTH": "0"}
    return configs


def quartiles(values):
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[1], q[2]


def run(argv, env_extra, cpus=None):
    env = dict(os.environ, **env_extra)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    out = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=180, preexec_fn=pin
    )
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line), out.stderr
    raise RuntimeError("no result from %s (exit %d): %s" % (" ".join(argv), out.returncode, out.stderr[-400:]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("alloc_pairs")
    parser.add_argument("gpuleak")
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--sites", default="1,8,48")
    parser.add_argument("--seconds", type=float, default=330)
    parser.add_argument("--async-pairs", type=int, default=20000)
    parser.add_argument("--sync-pairs", type=int, default=200)
    parser.add_argument(
        "--breakdown-sites", type=int, default=0, help="also run the skip_PART configurations at this number of sites"
    )
    parser.add_argument(
        "--in-process-only", action="store_true", help="only the in-process comparisons (and their breakdown)"
    )
    parser.add_argument(
        "--cpus", default="", help="comma-separated CPUs each run is pinned to (default: the first four allowed)"
    )
    args = parser.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    cpus = {int(c) for c in args.cpus.split(",")} if args.cpus else set(allowed[:4])
    traces = tempfile.mkdtemp(prefix="gpuleak-async-pairs-")
    under_gpuleak = [args.gpuleak, "run", "-q", "--orphan-grace", "0", "-o", traces, "--"]

    def clear_traces():
        # `gpuleak run -o` refuses a folder that holds an earlier run's traces.
        for entry in os.listdir(traces):
            path = os.path.join(traces, entry)
            if os.path.isfile(path):
                os.remove(path)

    def pairs_argv(sites, sanitizer=False):
        if sanitizer:
            return [
                "compute-sanitizer",
                "--tool",
                "memcheck",
                "--leak-check",
                "full",
                args.alloc_pairs,
                "3",
                str(args.async_pairs // 4),
                str(args.sync_pairs // 2),
                str(sites),
            ]
        return [args.alloc_pairs, "5", str(args.async_pairs), str(args.sync_pairs), str(sites)]

    configs = {
        "native": lambda sites: (pairs_argv(sites), {}),
        "gpuleak": lambda sites: (under_gpuleak + pairs_argv(sites), {}),
        "gpuleak_no_native_stacks": lambda sites: (under_gpuleak + pairs_argv(sites), {"GPULEAK_NATIVE_DEPTH": "0"}),
        "compute_sanitizer": lambda sites: (pairs_argv(sites, sanitizer=True), {}),
        "native_again": lambda sites: (pairs_argv(sites), {}),
    }
    for part in BREAKDOWN_PARTS if args.breakdown_sites else ():
        configs["skip_" + part] = (
            lambda part: lambda sites: (under_gpuleak + pairs_argv(sites), {"GPULEAK_BENCH_SKIP": part})
        )(part)
    if args.in_process_only:
        configs = {"native": configs["native"], "gpuleak": configs["gpuleak"]}
    names = list(configs)
    in_process_configs = breakdown_configs() if args.breakdown_sites else {}
    in_process_argv = lambda sites: under_gpuleak + pairs_argv(sites)
    sites_list = [int(s) for s in args.sites.split(",")]
    # Which backend `gpuleak run` records with, and that it records (one short verbose run).
    check, check_err = run(under_gpuleak + [args.alloc_pairs, "1", "1000", "10", "1"], {"GPULEAK_VERBOSE": "1"})
    clear_traces()
    backend = next(
        (line.split("capture backend: ", 1)[1] for line in check_err.splitlines() if "capture backend: " in line),
        "unknown: " + check_err[-300:],
    )
    samples = {str(s): {n: {"async": [], "sync": []} for n in names} for s in sites_list}
    in_process = {str(s): [] for s in sites_list}
    in_process_skip = {name: [] for name in in_process_configs}
    errors = []
    started = time.time()
    rounds_done = 0
    for r in range(args.rounds):
        if time.time() - started > args.seconds:
            break
        for sites in sites_list:
            turn = [n for n in names if not n.startswith("skip_") or sites == args.breakdown_sites]
            for i in range(len(turn) + 1):
                if i == len(turn):  # the in-process comparison, once a round
                    try:
                        result, _ = run(
                            in_process_argv(sites), {"GPULEAK_TRACE_DIR": traces, "GPULEAK_BENCH_IN_PROCESS": "1"}, cpus
                        )
                        in_process[str(sites)].append(result)
                    except Exception as error:
                        errors.append("in-process sites %d round %d: %s" % (sites, r, error))
                    clear_traces()
                    # The breakdown in one process: the machine's per-process state
                    # cancels out, so a part's cost is recording with it over recording
                    # without it, each against the same process's wrappers.
                    for part, extra in in_process_configs.items() if sites == args.breakdown_sites else ():
                        try:
                            result, _ = run(
                                in_process_argv(sites),
                                dict(extra, GPULEAK_TRACE_DIR=traces, GPULEAK_BENCH_IN_PROCESS="1"),
                                cpus,
                            )
                            in_process_skip[part].append(result)
                        except Exception as error:
                            errors.append("in-process %s round %d: %s" % (part, r, error))
                        clear_traces()
                    continue
                name = turn[(i + r) % len(turn)]
                argv, env = configs[name](sites)
                try:
                    result, _ = run(argv, dict(env, GPULEAK_TRACE_DIR=traces), cpus)
                    samples[str(sites)][name]["async"].append(result["async_pair_us"])
                    samples[str(sites)][name]["sync"].append(result["sync_pair_us"])
                except Exception as error:  # a failed run leaves a hole, and says so
                    errors.append("%s sites %d round %d: %s" % (name, sites, r, error))
                    samples[str(sites)][name]["async"].append(None)
                    samples[str(sites)][name]["sync"].append(None)
                clear_traces()
        rounds_done += 1
        print("round %d done after %.0f s" % (r, time.time() - started), flush=True)
    figures = {}
    for sites, per_config in samples.items():
        native = per_config["native"]
        row = {}
        for name, values in per_config.items():
            entry = {}
            for kind in ("async", "sync"):
                mine = [v for v in values[kind] if v is not None]
                entry["median_us_" + kind] = round(statistics.median(mine), 4) if mine else None
                if name == "native" or not mine:
                    continue
                ratios = [v / b for v, b in zip(values[kind], native[kind]) if v is not None and b is not None]
                if not ratios:
                    continue
                q1, q2, q3 = quartiles(ratios)
                entry[kind] = {
                    "round_ratios": [round(x, 3) for x in ratios],
                    "median_round_ratio": round(q2, 3),
                    "iqr_round_ratio": round(q3 - q1, 3),
                    "ratio_of_medians": round(
                        statistics.median(mine) / statistics.median([b for b in native[kind] if b]), 3
                    ),
                }
            row[name] = entry
        ratios = {"recording": [], "empty": []}
        for result in in_process[sites]:
            medians = result["async_median_us"]
            off, empty, recording = (medians[k] for k in list(medians))  # in alloc_pairs' order
            ratios["recording"].append(recording / off)
            ratios["empty"].append(empty / off)
        if ratios["recording"]:
            entry = {}
            for what, values in ratios.items():
                q1, q2, q3 = quartiles(values)
                entry[what] = {
                    "process_ratios": [round(x, 3) for x in values],
                    "median_ratio": round(q2, 3),
                    "iqr": round(q3 - q1, 3),
                }
            entry["modes"] = list(in_process[sites][0]["async_median_us"])
            entry["median_us_async"] = {
                k: round(statistics.median(r["async_median_us"][k] for r in in_process[sites]), 4)
                for k in entry["modes"]
            }
            row["gpuleak_in_process"] = entry
        if int(sites) == args.breakdown_sites and ratios["recording"]:
            recording = statistics.median(ratios["recording"])
            parts = {}
            for part, results in in_process_skip.items():
                skipped = []
                for result in results:
                    medians = result["async_median_us"]
                    off, _, rec = (medians[k] for k in list(medians))
                    skipped.append(rec / off)
                if skipped:
                    q1, q2, q3 = quartiles(skipped)
                    parts[part] = {
                        "recording_ratio": round(q2, 3),
                        "iqr": round(q3 - q1, 3),
                        "below_full_recording": round(recording - q2, 3),
                        "environment": in_process_configs[part],
                    }
            row["in_process_breakdown"] = parts
        g = row.get("gpuleak", {}).get("async")
        row["meets_target"] = bool(g) and g["median_round_ratio"] <= TARGET_RATIO and g["iqr_round_ratio"] <= TARGET_IQR
        figures[sites] = row
    result = {
        "what": "1 MiB cudaMallocAsync+cudaFreeAsync (async) and cudaMalloc+cudaFree (sync) pairs, us per "
        "pair (median of each process's 5 inner rounds), fresh processes, configurations interleaved "
        "in turning order; round ratios against native of the same round and sites",
        "command": " ".join(["python3", sys.argv[0]] + sys.argv[1:]),
        "capture_backend": backend.strip(),
        "rounds_done": rounds_done,
        "seconds": round(time.time() - started, 1),
        "target": {"async_median_round_ratio_max": TARGET_RATIO, "async_iqr_max": TARGET_IQR},
        "cpus": sorted(cpus),
        "samples_us": samples,
        "in_process": in_process,
        "figures": figures,
        "errors": errors,
        "meets_target": all(f["meets_target"] for f in figures.values()) and rounds_done >= 8,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    for sites, row in figures.items():
        for name in names[1:]:
            if name not in row or row[name].get("median_us_async") is None:
                continue
            a = row[name].get("async") or {}
            s = row[name].get("sync") or {}
            print(
                "%2s sites %-26s async %5.2fx (IQR %.2f)  sync %5.2fx"
                % (
                    sites,
                    name,
                    a.get("median_round_ratio", float("nan")),
                    a.get("iqr_round_ratio", float("nan")),
                    s.get("median_round_ratio", float("nan")),
                )
            )
        inside = row.get("gpuleak_in_process")
        if inside:
            print(
                "%2s sites %-26s async %5.2fx (IQR %.2f)  empty hooks %5.2fx"
                % (
                    sites,
                    "gpuleak_in_process",
                    inside["recording"]["median_ratio"],
                    inside["recording"]["iqr"],
                    inside["empty"]["median_ratio"],
                )
            )
        for part, cost in row.get("in_process_breakdown", {}).items():
            print(
                "%2s sites in process, %-18s async %5.2fx (IQR %.2f): %+.3fx below full recording"
                % (sites, part, cost["recording_ratio"], cost["iqr"], cost["below_full_recording"])
            )
    print("backend: %s; rounds %d; meets 1.2x / IQR 0.15: %s" % (backend.strip(), rounds_done, result["meets_target"]))


if __name__ == "__main__":
    main()
