"""Intermediate outputs saved into a list that is a class attribute.

Reported: https://discuss.pytorch.org/t/cuda-out-of-memory-error-understanding-how-pytorch-stores-class-variable/13778
("trying to save intermediate output to a class variable":
`Bottleneck.out_saved[self.counter] = out`, CUDA out of memory). The shape is
the post's: a DenseNet bottleneck keeps its concatenated output in the
class-level list `out_saved`, one slot per training batch, so that frozen
layers can replay it later. The slots fill one per step, each with an output
of 64 x 48 x 16 x 16 float32 = 3 MiB (backward has already freed the graph
behind it; the tensor itself stays).

Holder: the list `out_saved` (attribute of class Bottleneck).
Fix: store `out.detach()` (on the CPU if the replay can wait), or recompute.
"""
import torch
from torch import nn

from case_options import parse_args

BATCH = 64


class Bottleneck(nn.Module):
    out_saved = [0] * 900

    def __init__(self, channels, growth):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv1 = nn.Conv2d(channels, 4 * growth, kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, kernel_size=3, padding=1, bias=False)
        self.counter = 0

    def forward(self, x):
        out = self.conv1(torch.relu(self.bn1(x)))
        out = self.conv2(torch.relu(self.bn2(out)))
        out = torch.cat((x, out), 1)
        Bottleneck.out_saved[self.counter] = out  # KEPT: item-assignment
        self.counter += 1
        return out


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), Bottleneck(32, 16), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(48, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        images = torch.randn(BATCH, 3, 16, 16, device=device)
        labels = torch.randint(0, 10, (BATCH,), device=device)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
