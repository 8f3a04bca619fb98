"""torch.profiler control: profile_memory and record_shapes active for the whole run.

Reported: https://github.com/pytorch/pytorch/issues/193348 (the process's
host RSS grows while the profiler runs; "CUDA allocated/reserved memory
remains constant") and https://github.com/Lightning-AI/pytorch-lightning/issues/10717
(RAM grows with the PyTorch profiler on).

The profiler keeps every event in host memory; GPU memory is flat after
warm-up. Not a GPU leak. The run must still write its profiler trace.

    python3 control_profile_memory_active.py --steps 200 --trace-dir DIR [--device cuda]

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per step and
`CLIENT_PROFILER {"traces", "cuda_kernels"}` at the end.
"""
import argparse
import json
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--trace-dir", default="profiler-traces")
    args = parser.parse_args()
    os.makedirs(args.trace_dir, exist_ok=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 1024)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    with profile(activities=activities, profile_memory=True, record_shapes=True) as prof:
        for step in range(1, args.steps + 1):
            started = time.perf_counter()
            x = torch.randn(64, 256, generator=generator).to(args.device)
            y = torch.randint(0, 1024, (64,), generator=generator).to(args.device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                               "step_ms": (time.perf_counter() - started) * 1e3}),
                  flush=True)
    cuda_kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
    prof.export_chrome_trace(os.path.join(args.trace_dir, "run.json"))
    traces = len([f for f in os.listdir(args.trace_dir) if f.endswith(".json")])
    print("CLIENT_PROFILER " + json.dumps({"traces": traces, "cuda_kernels": cuda_kernels}))


if __name__ == "__main__":
    main()
