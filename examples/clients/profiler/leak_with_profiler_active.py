"""torch.profiler active during training (CUDA activities), and a leak in the loop.

Reported: the profiler set-up of https://github.com/ecmwf/WeatherGenerator/pull/1842
(ProfilerActivity.CPU and CUDA, a wait/warmup/active schedule stepped every
iteration); a profiler and a second CUPTI client cannot both hold CUPTI's
callbacks: https://github.com/pytorch/pytorch/issues/117935. The leak is
https://github.com/TRI-ML/packnet-sfm/pull/51's: outputs appended to a list.

Every step keeps the detached outputs (64 x 1024 float32, 256 KiB) in
`epoch_outputs` while the profiler records steps 3-7 of every 10 and writes
a Chrome trace at each cycle's end. The run must still write its profiler
traces (the case checks the trace folder) and gpuleak must still record.

    python3 leak_with_profiler_active.py --steps 200 --trace-dir DIR [--device cuda]

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per step and
`CLIENT_PROFILER {"traces", "cuda_kernels"}` at the end.
"""
import argparse
import json
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule


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
    epoch_outputs = []
    cuda_kernels = [0]

    def on_trace_ready(prof):
        cuda_kernels[0] += sum(1 for e in prof.events() if e.device_type.name == "CUDA")
        prof.export_chrome_trace(os.path.join(args.trace_dir, "step-%d.json" % prof.step_num))

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    with profile(activities=activities, schedule=schedule(wait=2, warmup=1, active=5),
                 on_trace_ready=on_trace_ready) as prof:
        for step in range(1, args.steps + 1):
            started = time.perf_counter()
            x = torch.randn(64, 256, generator=generator).to(args.device)
            y = torch.randint(0, 1024, (64,), generator=generator).to(args.device)
            outputs = model(x)
            loss = torch.nn.functional.cross_entropy(outputs, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_outputs.append(outputs.detach())  # LEAK: tensors-kept-alive
            prof.step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                               "step_ms": (time.perf_counter() - started) * 1e3}),
                  flush=True)
    traces = len([f for f in os.listdir(args.trace_dir) if f.endswith(".json")])
    print("CLIENT_PROFILER " + json.dumps({"traces": traces, "cuda_kernels": cuda_kernels[0]}))


if __name__ == "__main__":
    main()
