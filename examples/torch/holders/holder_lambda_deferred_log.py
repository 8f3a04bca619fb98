"""Logging deferred through lambdas to avoid a device sync every step.

Reported: https://github.com/deepspeedai/DeepSpeed/pull/5135 ("avoid item()
outside gas to improve performance": `.item()` forces a device/host sync, so
logging is deferred). The shape here: to keep the GPU busy, the loop queues
`lambda: ...` calls that read the logits only when the log is flushed, every
`flush_every` steps -- configured larger than the run. Each lambda captures
that step's logits, bound as a default argument so that each lambda sees its
own step (512 x 512 float32 = 1 MiB on the GPU).

Holder: the list `pending` (local of `train`); its elements are lambdas
capturing `logits`.
Fix: queue `logits.detach().float().mean()` (a 1-element tensor) or flush
more often; never queue whole activations.
"""
import torch
from torch import nn

from case_options import parse_args

BATCH, FEATURES, CLASSES = 512, 128, 512


def train(steps, device, flush_every=10_000):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    pending, written = [], []
    for step in range(steps):
        inputs = torch.randn(BATCH, FEATURES, device=device)
        targets = torch.randint(0, CLASSES, (BATCH,), device=device)
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        logits = logits.detach()
        # Default arguments bind this step's values (a bare closure would see only the last).
        pending.append(lambda logits=logits, step=step: ("logits/mean", logits.mean().item(), step))  # KEPT: append
        if (step + 1) % flush_every == 0:
            written.extend(record() for record in pending)
            pending.clear()
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
