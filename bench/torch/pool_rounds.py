"""Pools the interleaved rounds of several run_overhead.py results.

From one process to the next the launch-bound loop's native step time on the
H200 machine varied by up to 30% (0.87-1.34 ms), more than the costs being
compared, so a single run of a few rounds can land either side of a target.
Each round runs every configuration once, back to back; this takes each
round's ratio to that round's native run, over every file given, and prints
the medians (and hook vs history, round by round).

usage: python3 bench/torch/pool_rounds.py MODEL RESULT.json [RESULT.json ...]
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    model, paths = sys.argv[1], sys.argv[2:]
    ratios, hook_vs_history = {}, []
    for path in paths:
        with open(path) as f:
            samples = json.load(f)["samples_step_seconds"].get(model)
        if not samples or "native" not in samples:
            continue
        for config, values in samples.items():
            if config != "native":
                ratios.setdefault(config, []).extend(v / n for v, n in zip(values, samples["native"]))
        if "gpuleak_hook" in samples and "history" in samples:
            hook_vs_history.extend(h / p for h, p in zip(samples["gpuleak_hook"], samples["history"]))
    result = {"model": model, "files": paths,
              "median_round_ratio_to_native": {c: round(statistics.median(v), 3) for c, v in ratios.items()},
              "rounds": {c: len(v) for c, v in ratios.items()}}
    if hook_vs_history:
        result["hook_over_history"] = {"median": round(statistics.median(hook_vs_history), 3),
                                       "rounds": len(hook_vs_history),
                                       "rounds_hook_faster": sum(r < 1 for r in hook_vs_history)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
