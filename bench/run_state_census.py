"""How often a process lands in the machine's fast or slow state, with and without the collector.

On the H200 machine the native stream-ordered pair runs at about 0.65 us in
some processes and about 1.2 us in others, fixed for a process's life.
run_collector_overhead.py compares like with like (ratio_by_state); this
census asks whether loading the collector changes the odds of the slow state,
which a like-for-like ratio would not show. It starts many short processes,
the configurations taking turns, and counts each configuration's samples in
either state (states_of).

usage: python3 run_state_census.py ALLOC_PAIRS COLLECTOR OUT_JSON [PROCESSES_PER_CONFIG]
"""
import json
import statistics
import sys
import tempfile
import time

from run_collector_overhead import run, states_of


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    pairs, collector, out_json = sys.argv[1:4]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    traced = {"CUDA_INJECTION64_PATH": collector, "GPULEAK_TRACE_DIR": tempfile.mkdtemp(prefix="gpuleak-census-")}
    configs = {
        "native": {},
        "gpuleak": traced,
        "collector_loaded_recording_nothing": dict(traced, GPULEAK_EMPTY_CALLBACKS="1"),
    }
    samples = {name: [] for name in configs}
    started = time.time()
    for _ in range(count):
        for name, env in configs.items():
            samples[name].append(run([pairs, "3", "4000", "20"], env)["async_pair_us"])
    result = {
        "command": "python3 bench/run_state_census.py " + " ".join(sys.argv[1:]),
        "what": "median microseconds per 1 MiB cudaMallocAsync+cudaFreeAsync pair, one sample per process",
        "samples_us": samples,
        "states": {},
        "seconds": round(time.time() - started, 1),
    }
    for name, values in samples.items():
        states = states_of(values)
        if states is None:
            result["states"][name] = {"one_state": len(values), "median_us": statistics.median(values)}
            continue
        fast, slow = states
        result["states"][name] = {
            "fast": len(fast),
            "slow": len(slow),
            "fast_median_us": statistics.median(fast),
            "slow_median_us": statistics.median(slow),
        }
    native = result["states"]["native"]
    for name, state in result["states"].items():
        if name != "native" and "fast" in state and "fast" in native:
            state["ratio_to_native"] = {
                "fast": state["fast_median_us"] / native["fast_median_us"],
                "slow": state["slow_median_us"] / native["slow_median_us"],
            }
    with open(out_json, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result["states"]), flush=True)


if __name__ == "__main__":
    main()
