"""torchrun, 2 ranks on one GPU (gloo): only the logging rank keeps every step's outputs.

Reported: https://github.com/TRI-ML/packnet-sfm/pull/51 ("Detach loss before
appending it to the training output list"), in the usual distributed shape
where only rank 0 logs; the training loop is PyTorch's DDP tutorial's
(https://github.com/pytorch/examples/tree/main/distributed/ddp).

Rank 0 appends the detached outputs (64 x 1024 float32, 256 KiB) to
`history` every step; rank 1 keeps nothing. Both ranks share cuda:0, so the
process group is gloo (NCCL refuses two ranks on one device).

    torchrun --standalone --nproc-per-node 2 leak_logging_rank_keeps_outputs.py --steps 200

Prints one `CLIENT_STEP {"rank", "step", "loss", "step_ms"}` line per step and rank.
"""
import argparse
import json
import os
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
    history = []
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        x = torch.randn(64, 256, generator=generator).to(device)
        y = torch.randint(0, 1024, (64,), generator=generator).to(device)
        outputs = ddp(x)
        loss = torch.nn.functional.cross_entropy(outputs, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            history.append(outputs.detach())  # LEAK: tensors-kept-alive
        if device.type == "cuda":
            torch.cuda.synchronize()
        print("CLIENT_STEP " + json.dumps({"rank": rank, "step": step, "loss": loss.item(),
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
