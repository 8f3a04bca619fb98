#!/usr/bin/env python3
"""What the collector adds per stream-ordered allocate/free pair on the interposer path, on the CPU.

build/bench/interposer_pairs (bench/cpu/interposer_pairs.cpp) makes cuMemAllocAsync +
cuMemFreeAsync pairs through libgpuleak_interposer.so into the stand-in libcuda of the
collector's tests (build/stand-in-driver/), SITES call sites taking turns through one
allocating function. Every configuration below is a fresh process; the configurations take
turns `--rounds` times; the figure is the median ns per pair in the recording thread's CPU
time. Each configuration turns one more part on, so neighbours' differences are the parts:

  native            the stand-in driver alone (no interposer, no collector)
  detached          the interposer's wrappers, no collector attached
  empty_hooks       the collector attached, hooks that return at once
  no_native_stacks  recording, GPULEAK_NATIVE_DEPTH=0
  no_stack_reuse    recording, every stack unwound (GPULEAK_REUSE_STACKS=0)
  recording         recording, the default (remembered stacks)
  skip_<part>       recording with one part left out through the benchmark-only
                    GPULEAK_BENCH_SKIP (docs/collector.md): seq, clock, device, stack_id,
                    buffer; recording minus skip_<part> is what the part costs

`--other-collector` times a second collector build (the one before a change) in the same
rounds, recording only.

usage: bench/run_interposer_pairs.py BUILD_DIR OUT.json [--sites 1,8,48] [--rounds 5]
       [--pairs 300000] [--depth 12] [--configs a,b] [--other-collector PATH]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SKIPPED_PARTS = ["seq", "clock", "device", "stack_id", "buffer"]


def configurations():
    configs = {
        "native": ("native", {}),
        "detached": ("detached", {}),
        "empty_hooks": ("empty", {}),
        "no_native_stacks": ("recording", {"GPULEAK_NATIVE_DEPTH": "0"}),
        "no_stack_reuse": ("recording", {"GPULEAK_REUSE_STACKS": "0"}),
        "recording": ("recording", {}),
    }
    for part in SKIPPED_PARTS:
        configs["skip_" + part] = ("recording", {"GPULEAK_BENCH_SKIP": part})
    return configs


def run_once(build, collector, hooks, env_extra, pairs, depth, sites, traces):
    program = os.path.join(build, "bench", "interposer_pairs")
    env = dict(
        os.environ, GPULEAK_TRACE_DIR=traces, LD_LIBRARY_PATH=os.path.join(build, "stand-in-driver"), **env_extra
    )
    for name in ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "GPULEAK_DISABLE", "GPULEAK_BENCH_SKIP"):
        if name not in env_extra:
            env.pop(name, None)
    if hooks != "native":
        env["LD_PRELOAD"] = os.path.join(build, "libgpuleak_interposer.so")
        env["CUDA_INJECTION64_PATH"] = collector
        env["GPULEAK_BACKEND"] = "interposer"
    out = subprocess.run(
        [program, hooks, str(pairs), str(depth), str(sites)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,
    )
    for name in os.listdir(traces):
        os.remove(os.path.join(traces, name))
    if out.returncode != 0:
        raise RuntimeError("%s %s exited %d: %s" % (hooks, env_extra, out.returncode, out.stderr[-400:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--sites", default="1,8,48")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=300000)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--configs", default=None, help="comma-separated subset")
    parser.add_argument("--other-collector", default=None)
    parser.add_argument("--other-name", default="other")
    args = parser.parse_args()
    configs = configurations()
    if args.configs:
        configs = {k: v for k, v in configs.items() if k in args.configs.split(",")}
    collector = os.path.join(args.build, "libgpuleak_collector.so")
    runs = [(name, collector, hooks, env) for name, (hooks, env) in configs.items()]
    if args.other_collector:
        runs.append((args.other_name, args.other_collector, "recording", {}))
    traces = tempfile.mkdtemp(prefix="gpuleak-interposer-pairs-")
    sites_list = [int(s) for s in args.sites.split(",")]
    samples = {}
    for r in range(args.rounds):
        for sites in sites_list:
            # The order turns each round, so no configuration always follows the same other.
            for i in range(len(runs)):
                name, lib, hooks, env = runs[(i + r) % len(runs)]
                result = run_once(args.build, lib, hooks, env, args.pairs, args.depth, sites, traces)
                samples.setdefault(name, {}).setdefault(str(sites), []).append(result)
        print("round %d done" % r, flush=True)
    results = {}
    for name, per_sites in samples.items():
        for sites, values in per_sites.items():
            results.setdefault(name, {})[sites] = {
                "cpu_ns_per_pair": round(statistics.median(v["cpu_ns_per_pair"] for v in values), 1),
                "process_cpu_ns_per_pair": round(statistics.median(v["process_cpu_ns_per_pair"] for v in values), 1),
                "wall_ns_per_pair": round(statistics.median(v["ns_per_pair"] for v in values), 1),
                "all_cpu_ns": [v["cpu_ns_per_pair"] for v in values],
            }
    # The parts, from the medians: each step's difference to the one before it.
    parts = {}
    for sites in map(str, sites_list):
        m = {name: results[name][sites]["cpu_ns_per_pair"] for name in results}
        row = {}

        def step(label, high, low):
            if high in m and low in m:
                row[label] = round(m[high] - m[low], 1)

        step("interposer_wrappers", "detached", "native")
        step("hook_calls", "empty_hooks", "detached")
        step("recording_without_native_stacks", "no_native_stacks", "empty_hooks")
        step("native_stack_remembered", "recording", "no_native_stacks")
        step("native_stack_unwound_every_time", "no_stack_reuse", "no_native_stacks")
        for part in SKIPPED_PARTS:
            step(part, "recording", "skip_" + part)
        step("collector_total", "recording", "native")
        parts[sites] = row
    for sites in map(str, sites_list):
        print(
            "%2s sites: %s" % (sites, "  ".join("%s %.1f" % (n, results[n][sites]["cpu_ns_per_pair"]) for n in results))
        )
        print("   parts (ns/pair): %s" % json.dumps(parts[sites]))
    report = {
        "what": "ns per cuMemAllocAsync+cuMemFreeAsync pair through libgpuleak_interposer.so into the "
        "stand-in libcuda (bench/cpu/interposer_pairs.cpp), SITES call sites in turn, in the "
        "calling thread's CPU time (process_cpu adds the writer thread; wall counts other "
        "processes on a shared machine); medians of rounds of fresh processes; parts are "
        "differences of medians (bench/run_interposer_pairs.py's docstring)",
        "command": " ".join(["python3", sys.argv[0]] + sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "results": results,
        "parts_ns_per_pair": parts,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
