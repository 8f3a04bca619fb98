"""Measures what gpuleak's step boundary costs per training step, on the CPU.

Usage (from the repository root, after building the collector into build-py):
    GPULEAK_BUILD_DIR=build-py /usr/bin/python3 tests/python/measure_step_cost.py

Prints microseconds per step for:
  hook_only      the optimizer pre+post hooks and the step mark (recording on),
                 holder-request polling on, no memory sampler (CPU: no CUDA);
  with_sampler   the same plus the sampler's per-step check, with stand-in CUDA
                 calls that cost nothing (the rate limit decides how often they run);
  sgd_step       optimizer.step() of a 2-parameter model with and without the
                 hooks registered, to see the cost in a real (tiny) training step.
Each figure is the best of several rounds (noise only adds time).
"""

import ctypes
import os
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

STEPS = 20000
ROUNDS = 7


def best_per_step_us(function):
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best / STEPS * 1e6


def main():
    build = os.environ.get("GPULEAK_BUILD_DIR") or os.path.join(REPO, "build-py")
    trace_dir = tempfile.mkdtemp(prefix="gpuleak-step-cost-")
    os.environ.update(
        {
            "GPULEAK_COLLECTOR": os.path.join(build, "libgpuleak_collector.so"),
            "GPULEAK_TRACE_DIR": trace_dir,
            "GPULEAK_HOLDER_REQUESTS": "1",
        }
    )
    library = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
    assert library.gpuleak_start_recording() == 1

    import torch
    from gpuleak import _boot, _collector, _runtime
    from gpuleak._memory_samples import MemorySampler

    clock = _runtime.clock()
    optimizer = types.SimpleNamespace()

    def hook_only():
        started, finished = clock.on_optimizer_step_started, clock.on_optimizer_step_finished
        for _ in range(STEPS):
            started(optimizer, (), {})
            finished(optimizer, (), {})

    results = {"hook_only": best_per_step_us(hook_only)}

    stats = {"allocated_bytes": {"all": {"current": 1}}, "reserved_bytes": {"all": {"current": 2}}}
    fake_torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(current_device=lambda: 0, mem_get_info=lambda d: (1, 2)),
        _C=types.SimpleNamespace(_cuda_memoryStats=lambda d: stats),
    )
    clock.sampler = MemorySampler(fake_torch, _collector.load(), pool_backend=False)
    results["with_sampler"] = best_per_step_us(hook_only)
    clock.sampler = None

    model = torch.nn.Linear(1, 1)
    sgd = torch.optim.SGD(model.parameters(), lr=0.0)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)

    def sgd_steps():
        for _ in range(STEPS):
            sgd.step()

    results["sgd_step_without_hooks"] = best_per_step_us(sgd_steps)
    _boot.register_step_hooks(torch, clock)
    results["sgd_step_with_hooks"] = best_per_step_us(sgd_steps)
    library.gpuleak_flush()
    print(
        "python %s, torch %s, %d steps x best of %d rounds" % (sys.version.split()[0], torch.__version__, STEPS, ROUNDS)
    )
    for name, value in results.items():
        print("%-24s %7.2f us/step" % (name, value))
    sys.stdout.flush()
    os._exit(0)  # see conftest.py: the collector can hang in its atexit handler


if __name__ == "__main__":
    main()
