"""Collector overhead on allocate/free pairs, on the GPU machine.

Runs bench/cuda/alloc_pairs natively, under the gpuleak collector (native
stacks on) and under compute-sanitizer --leak-check full, interleaved for
several rounds so drift of the machine hits every configuration alike, and
reports the median per-pair time of each and the ratios to native.
Targets (issue 2): async pair <= 2.0x native, sync pair <= 1.1x native.

usage: python3 run_collector_overhead.py ALLOC_PAIRS COLLECTOR OUT_JSON [ROUNDS]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(argv, env_extra):
    env = dict(os.environ, **env_extra)
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=240)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no result from %s: %s" % (argv, out.stderr[-400:]))


def main():
    pairs, collector, out_json = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    trace_dir = tempfile.mkdtemp(prefix="gpuleak-bench-")
    traced = {"CUDA_INJECTION64_PATH": collector, "GPULEAK_TRACE_DIR": trace_dir}
    configs = {
        "native": ([pairs, "7", "20000", "500"], {}),
        "gpuleak": ([pairs, "7", "20000", "500"], traced),
        # What the parts cost: CUPTI's callbacks alone, and recording without native stacks.
        "cupti_empty_callbacks": ([pairs, "7", "20000", "500"], dict(traced, GPULEAK_EMPTY_CALLBACKS="1")),
        "gpuleak_no_native_stacks": ([pairs, "7", "20000", "500"], dict(traced, GPULEAK_NATIVE_DEPTH="0")),
        # The clock: auto picks the coarse clock where a precise read is a system call.
        "gpuleak_precise_clock": ([pairs, "7", "20000", "500"], dict(traced, GPULEAK_CLOCK="precise")),
        "gpuleak_coarse_clock": ([pairs, "7", "20000", "500"], dict(traced, GPULEAK_CLOCK="coarse")),
        "compute_sanitizer": (["compute-sanitizer", "--tool", "memcheck", "--leak-check", "full", pairs, "5",
                               "5000", "200"], {}),
    }
    samples = {name: {"async": [], "sync": []} for name in configs}
    started = time.time()
    for r in range(rounds):
        for name, (argv, env) in configs.items():
            result = run(argv, env)
            samples[name]["async"].append(result["async_pair_us"])
            samples[name]["sync"].append(result["sync_pair_us"])
    medians = {name: {kind: statistics.median(v) for kind, v in s.items()} for name, s in samples.items()}
    result = {
        "command": "python3 bench/run_collector_overhead.py %s %s %s %d" % (pairs, collector, out_json, rounds),
        "what": "median microseconds per 1 MiB allocate+free pair; each configuration run %d times, interleaved" % rounds,
        "samples_us": samples,
        "median_us": medians,
        "ratio_to_native": {
            name: {kind: medians[name][kind] / medians["native"][kind] for kind in ("async", "sync")}
            for name in configs if name != "native"},
        "targets": {"gpuleak_async_max_ratio": 2.0, "gpuleak_sync_max_ratio": 1.1},
        "seconds": round(time.time() - started, 1),
    }
    ratio = result["ratio_to_native"]["gpuleak"]
    result["meets_targets"] = ratio["async"] <= 2.0 and ratio["sync"] <= 1.1
    with open(out_json, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({"median_us": medians, "ratio_to_native": result["ratio_to_native"],
                      "meets_targets": result["meets_targets"]}), flush=True)


if __name__ == "__main__":
    main()
