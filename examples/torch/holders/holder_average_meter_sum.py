"""A running-average meter that sums loss tensors with their graphs.

Reported: https://github.com/visionml/pytracking/pull/313 ("Fix memory leak in
LTRTrainer._update_stats()": the method "is called with `val`, which is a
`Tensor` with gradients. When used with `AverageMeter`, the gradient graph
will be accumulated during training and won't be released"). The shape here:
each training step also computes a validation loss under autograd (no
`torch.no_grad()`) and feeds the tensor to `AverageMeter.update`, whose
`self.sum += val * n` chains every step's validation graph into `sum`;
nothing ever calls backward on it, so each step's validation activations stay
(256 x 1024 float32 and more per step).

Holder: the tensor `sum` (attribute of AverageMeter).
Fix: `meter.update(val.item(), n)`, and compute the validation loss under
`torch.no_grad()`.
"""
import torch
from torch import nn

from case_options import parse_args

BATCH, FEATURES = 256, 1024


class AverageMeter:
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n  # KEPT: augmented-assignment
        self.count += n
        self.avg = self.sum / self.count


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.ReLU(), nn.Linear(FEATURES, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    val_loss_meter = AverageMeter()
    val_inputs = torch.randn(BATCH, FEATURES, device=device)
    val_labels = torch.randint(0, 10, (BATCH,), device=device)
    for _ in range(steps):
        inputs = torch.randn(BATCH, FEATURES, device=device)
        labels = torch.randint(0, 10, (BATCH,), device=device)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        val_loss = nn.functional.cross_entropy(model(val_inputs + 0.01 * torch.randn_like(val_inputs)), val_labels)
        val_loss_meter.update(val_loss, BATCH)
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
