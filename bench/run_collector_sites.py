#!/usr/bin/env python3
"""The collector's cost per allocate/free pair on the CPU, from several call sites.

build/bench/collector_api_pairs records pairs through the collector's C API
(the path of PyTorch's allocator hook) with native stacks, SITES call sites
taking turns through one allocating function. For 1, 2, 8 and 48 sites, with
remembered stacks (the default) and without (GPULEAK_REUSE_STACKS=0), and the
calls alone (GPULEAK_DISABLE=1), each a fresh process, the configurations
taking turns `--rounds` times; the median ns/pair is the figure.
`--other-collector` times a second collector build the same way, in the same
rounds (the one before a change, say).

usage: bench/run_collector_sites.py BUILD_DIR OUT.json [--sites 1,2,8,48]
       [--rounds 5] [--pairs 300000] [--depth 12] [--other-collector PATH]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def ns_per_pair(program, collector, pairs, depth, sites, env_extra, traces):
    env = dict(os.environ, GPULEAK_TRACE_DIR=traces, **env_extra)
    out = subprocess.run(
        [program, collector, str(pairs), str(depth), str(sites)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,
    )
    for name in os.listdir(traces):
        os.remove(os.path.join(traces, name))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["cpu_ns_per_pair"], result["ns_per_pair"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--sites", default="1,2,8,48")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=300000)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--other-collector", default=None)
    parser.add_argument("--other-name", default="other")
    args = parser.parse_args()
    program = os.path.join(args.build, "bench", "collector_api_pairs")
    collectors = {"this": os.path.join(args.build, "libgpuleak_collector.so")}
    if args.other_collector:
        collectors[args.other_name] = args.other_collector
    modes = {"reuse": {}, "no_reuse": {"GPULEAK_REUSE_STACKS": "0"}, "calls_alone": {"GPULEAK_DISABLE": "1"}}
    traces = tempfile.mkdtemp(prefix="gpuleak-sites-")
    samples = {}
    for r in range(args.rounds):
        for sites in [int(s) for s in args.sites.split(",")]:
            for cname, collector in collectors.items():
                for mode, env in modes.items():
                    if mode == "calls_alone" and cname != "this":
                        continue
                    key = (cname, mode, sites)
                    samples.setdefault(key, []).append(
                        ns_per_pair(program, collector, args.pairs, args.depth, sites, env, traces)
                    )
        print("round %d done" % r, flush=True)
    results = {}
    for (cname, mode, sites), values in sorted(samples.items()):
        results.setdefault(cname, {}).setdefault(mode, {})[str(sites)] = {
            "ns_per_pair": round(statistics.median(v[0] for v in values), 1),
            "wall_ns_per_pair": round(statistics.median(v[1] for v in values), 1),
            "all_cpu_ns": [v[0] for v in values],
        }
    for cname, per_mode in results.items():
        for sites in args.sites.split(","):
            line = "%-8s %2s sites:" % (cname, sites)
            for mode in modes:
                if mode in per_mode:
                    line += "  %s %6.1f ns" % (mode, per_mode[mode][sites]["ns_per_pair"])
            print(line)
    report = {
        "what": "ns per allocate/free pair recorded through the collector's C API with native "
        "stacks, SITES call sites in turn through one allocating function "
        "(bench/cpu/collector_api_pairs.cpp), in the recording thread's CPU time (the wall "
        "clock also counts other processes on a shared machine: wall_ns_per_pair); "
        "reuse = remembered stacks, no_reuse = "
        "GPULEAK_REUSE_STACKS=0, calls_alone = GPULEAK_DISABLE=1; medians of rounds",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "collectors": collectors,
        "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
