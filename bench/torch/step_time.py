"""Times training steps of a small PyTorch model, for the overhead benchmark.

Models: "mlp" is launch-bound (tiny MLP, batch 4: the CPU issuing kernels
is the bottleneck, so per-allocation costs show); "transformer" is GPU-bound
(6-layer encoder, where CPU-side costs hide behind the GPU); "gpt2-tiny" and
"gpt2-12" are Hugging Face transformers' GPT-2 built from a config (no
download): 2 layers, batch 2 x 128 tokens (launch-bound), and the full 12
layers, batch 8 x 512 (GPU-bound), trained with AdamW.

The tracking mode is chosen by the harness: through the environment
(CUDA_INJECTION64_PATH, PYTORCH_CUDA_ALLOC_CONF) and --mode:
  native   nothing extra in the process
  history  PyTorch's own torch.cuda.memory._record_memory_history(stacks="python")
  hook     gpuleak's allocator trace tracker (python/gpuleak/torch_hook.py) and
           frame reader in this process, without `gpuleak run` (no CUPTI,
           no step hooks): what tensor tracking itself costs (with
           GPULEAK_DISABLE=1 the tracker forwards to a collector that records
           nothing: PyTorch's own trace path and the calls alone)
Prints one JSON object: median seconds per step over --rounds rounds.

--alternate=-2,-1,0,1,2,3 (under `gpuleak run`, or with --mode hook) times
the parts of gpuleak inside this one process: each round runs the steps
once per mode (0: tensor events dropped at the door by the collector's
gpuleak_benchmark_tensor_recording, 1: recorded without stacks, 2: with
Python frames only, 3: as normal; -1: as 0, and gpuleak's Python hooks
taken out for the round: torch's global optimizer hooks, the backward
wrapper that lends Python stacks and the python-loop signal; -2: as -1, and driver calls not captured
(CUPTI's callbacks off, or the interposer detached): what is left of gpuleak
then is PyTorch's trace path into the tracker and the sampling thread).
Launch-bound step times differ by 10-45 % between processes of one
configuration, more than the parts themselves; within a process,
interleaved rounds see the same machine. The result adds each mode's median
step time and its median ratio to the first mode per round.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch


def build(model_name, device):
    if model_name == "mlp":
        model = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 10)).to(device)
        def batch():
            return torch.randn(4, 64, device=device), torch.randint(0, 10, (4,), device=device)
        def loss_of(x, y):
            return torch.nn.functional.cross_entropy(model(x), y)
    elif model_name.startswith("gpt2"):
        from transformers import GPT2Config, GPT2LMHeadModel

        tiny = model_name == "gpt2-tiny"
        config = GPT2Config(n_layer=2 if tiny else 12)
        model = GPT2LMHeadModel(config).to(device)
        model.train()
        batch_size, tokens = (2, 128) if tiny else (8, 512)
        def batch():
            ids = torch.randint(0, config.vocab_size, (batch_size, tokens), device=device)
            return ids, None
        def loss_of(ids, _):
            if tiny:
                return model(input_ids=ids, labels=ids).loss
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model(input_ids=ids, labels=ids).loss
    else:
        layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096,
                                                 batch_first=True)
        model = torch.nn.TransformerEncoder(layer, num_layers=6).to(device)
        def batch():
            return torch.randn(32, 512, 1024, device=device), None
        def loss_of(x, _):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model(x).float().pow(2).mean()
    return model, batch, loss_of


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "transformer", "gpt2-tiny", "gpt2-12"],
                        default="mlp")
    parser.add_argument("--mode", choices=["native", "history", "hook"], default="native")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--alternate", default="",
                        help="tensor-recording modes to alternate within each round, e.g. 0,3")
    args = parser.parse_args()

    device = torch.device("cuda")
    torch.manual_seed(0)
    model, batch, loss_of = build(args.model, device)
    if args.model.startswith("gpt2"):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    hook_message = None
    if args.mode == "history":
        torch.cuda.memory._record_memory_history(stacks="python")
    elif args.mode == "hook":
        sys.path.insert(0, os.environ["GPULEAK_PYTHON_DIR"])
        from gpuleak import torch_hook
        collector = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
        collector.gpuleak_start_recording()
        from gpuleak import frame_reader  # Python lines while torch has released the GIL
        frame_reader.register(collector)
        started = time.perf_counter()
        ok, hook_message = torch_hook.attach(torch, collector)
        hook_seconds = time.perf_counter() - started
        if not ok:
            print(json.dumps({"error": hook_message}))
            return 1

    def step():
        x, y = batch()
        loss = loss_of(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    if args.alternate:
        return alternate(args, step, torch)
    rounds = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / args.steps)
    result = {"model": args.model, "mode": args.mode,
              "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "injection": bool(os.environ.get("CUDA_INJECTION64_PATH")),
              "step_seconds": statistics.median(rounds), "rounds": rounds,
              "steps_per_round": args.steps, "torch": torch.__version__}
    if args.mode == "hook":
        result["hook_attach_seconds"] = hook_seconds
    print(json.dumps(result))
    return 0


def without_python_hooks(torch):
    """Takes gpuleak's per-step Python hooks out; returns what puts them back."""
    from torch.optim import optimizer as optim_module
    graph = torch.autograd.graph
    saved = {name: dict(getattr(optim_module, name)) for name in
             ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")}
    for name in saved:
        getattr(optim_module, name).clear()
    wrappers = {m: getattr(m, "_engine_run_backward", None) for m in (graph, torch.autograd)}
    for module, wrapper in wrappers.items():
        if wrapper is not None:
            module._engine_run_backward = getattr(wrapper, "__wrapped__", wrapper)

    loop_codes = without_python_loop()

    def restore():
        for code in loop_codes:
            sys.monitoring.set_local_events(code[0], code[1], sys.monitoring.events.JUMP)
        for name, hooks in saved.items():
            getattr(optim_module, name).update(hooks)
        for module, wrapper in wrappers.items():
            if wrapper is not None:
                module._engine_run_backward = wrapper
    return restore


def without_python_loop():
    """Stops gpuleak's python-loop signal (its sys.monitoring JUMP events on this
    script's code); returns the (tool, code) pairs to turn back on."""
    signal = getattr(sys.modules.get("gpuleak.python_loop"), "_signal", None)
    if signal is None or not getattr(signal, "on", False):
        return []
    codes = [(signal.tool, code) for code in signal.codes]
    for tool, code in codes:
        sys.monitoring.set_local_events(tool, code, 0)
    return codes


def without_driver_capture(then):
    """Stops capturing driver calls (benchmark entries of the collector); returns
    what resumes it and then calls `then`."""
    library = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
    switches = []
    for name in ("gpuleak_benchmark_callbacks", "gpuleak_benchmark_interposer"):
        switch = getattr(library, name, None)
        if switch is not None:
            switch.argtypes, switch.restype = [ctypes.c_int], ctypes.c_int
            if switch(0) == 0:  # 0: off; 2: recording again
                switches.append(switch)

    def restore():
        for switch in switches:
            switch(2)
        then()
    return restore


def alternate(args, step, torch):
    library = os.environ.get("GPULEAK_COLLECTOR")
    switch = getattr(ctypes.PyDLL(library), "gpuleak_benchmark_tensor_recording", None) \
        if library else None
    if switch is None:
        print(json.dumps({"error": "no collector with gpuleak_benchmark_tensor_recording"}))
        return 1
    switch.argtypes, switch.restype = [ctypes.c_int], ctypes.c_int
    modes = [int(m) for m in args.alternate.split(",")]
    times = {m: [] for m in modes}
    for r in range(args.rounds):
        # Rotated, so no mode always follows the same one.
        for m in modes[r % len(modes):] + modes[:r % len(modes)]:
            if switch(max(m, 0)) != 0:
                print(json.dumps({"error": "the collector is not recording"}))
                return 1
            restore = without_python_hooks(torch) if m < 0 else (lambda: None)
            if m < -1:
                restore = without_driver_capture(restore)
            try:
                start = time.perf_counter()
                for _ in range(args.steps):
                    step()
                torch.cuda.synchronize()
                times[m].append((time.perf_counter() - start) / args.steps)
            finally:
                restore()
    switch(3)
    base = times[modes[0]]
    result = {"model": args.model, "mode": args.mode, "alternate": modes,
              "steps_per_round": args.steps, "rounds": args.rounds, "torch": torch.__version__,
              "step_seconds": statistics.median(times[modes[-1]]),
              "mode_step_seconds": {str(m): statistics.median(v) for m, v in times.items()},
              "mode_ratio_to_first": {str(m): statistics.median(a / b for a, b in zip(v, base))
                                      for m, v in times.items()},
              "mode_rounds": {str(m): v for m, v in times.items()}}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
