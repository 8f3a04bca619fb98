"""CuPy: every iteration's result kept in a list.

Reported: https://github.com/cupy/cupy/issues/7166 ("Temporal memory leak":
memory stays until every array that holds it is deleted) and
https://github.com/cupy/cupy/issues/7038 ("how to reduce cupy memory usage?").

A signal-processing loop appends each block's power spectrum (256 x 1024
float32, 1 MiB) to `spectra` for a final average that only needs a running
sum.

    python3 leak_kept_spectra.py --steps 200

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per iteration
("loss" is the block's mean power, the loop's output).
"""
import argparse
import json
import time

import cupy as cp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    generator = cp.random.default_rng(0)
    spectra = []
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        block = generator.standard_normal((256, 2046), dtype=cp.float32)
        power = cp.abs(cp.fft.rfft(block, axis=1)) ** 2
        spectra.append(power.astype(cp.float32))  # LEAK: tensors-kept-alive
        mean_power = float(power.mean())
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": mean_power,
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)
    print("average power %.6f" % float(cp.stack(spectra).mean()))


if __name__ == "__main__":
    main()
