"""torchrun control, 2 ranks on one GPU (gloo): DDP training that keeps nothing.

Reported: PyTorch's DDP tutorial loop
(https://github.com/pytorch/examples/tree/main/distributed/ddp); two ranks on
one device is how multi-process code is tried on a one-GPU machine. DDP's
gradient buckets and gloo's staging buffers are allocated during the first
steps and reused. Not a leak, on either rank.

    torchrun --standalone --nproc-per-node 2 control_two_ranks.py --steps 200

Prints one `CLIENT_STEP {"rank", "step", "loss", "step_ms"}` line per step and rank.
"""
import argparse
import json
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 1024)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(100 + rank)
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        x = torch.randn(64, 256, generator=generator).to(device)
        y = torch.randint(0, 1024, (64,), generator=generator).to(device)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        print("CLIENT_STEP " + json.dumps({"rank": rank, "step": step, "loss": loss.item(),
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
