"""gpuleak.track() on the GPU (tests/gpu/suites/in_process.sh): an evaluation loop without
torch.no_grad() that sums every step's loss tensor (each sum keeps that step's graph and its
saved activations), and the same loop summing loss.item(). Prints one JSON line per block.

(A training loop that calls backward() each step frees the saved activations: its running
sum of loss tensors keeps only autograd nodes in host memory, which the first GPU run of this
suite showed as memory left behind, not GPU growth.)"""
import json
import sys

import torch

import gpuleak


def evaluate(steps, keep_tensor):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    total_loss = 0
    for _ in range(steps):
        loss = net(torch.randn(256, 512, device="cuda")).square().mean()
        total_loss += loss if keep_tensor else loss.item()
    return total_loss


def show(name, block):
    r = block.result
    print(
        json.dumps(
            {
                "block": name,
                "verdict": r.verdict,
                "steps": r.steps,
                "growth_bytes_per_step": r.growth_bytes_per_step,
                "left_behind_bytes": r.left_behind_bytes,
                "holder": r.holder,
                "keeping_line": r.keeping_line,
                "fix": r.fix,
                "complete": r.complete,
                "summary": r.summary(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    with gpuleak.track("keeps the loss tensor") as leaking:
        kept = evaluate(40, keep_tensor=True)
    show("leak", leaking)
    with gpuleak.track("keeps loss.item()") as clean:
        evaluate(40, keep_tensor=False)
    show("clean", clean)
    sys.stdout.flush()
