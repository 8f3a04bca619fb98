"""Online learning over a data stream with manual weight and hedge updates, without torch.no_grad().

Sources:
  https://github.com/alison-carrera/onn/pull/4  ("Add torch.no_grad() to prevent the GPU memory from keep
      increasing": "when doing manual gradient update, PyTorch will keep growing the computation graph. If
      dealing with extremely long data stream, the model will consume too much GPU memory")
  https://github.com/growingnet/gromo/issues/137  ("Memory on update of tensors": updates with
      requires_grad=True "cause the additions to be retained in the computational graph and unnecessarily
      increases the allocated memory")

What was reported: an online deep network trained with Hedge Backpropagation
updates its layers by hand after each mini-batch of the stream (no
optimizer): a backward(retain_graph=True) per output head, manual SGD on
`.data`, and a multiplicative update of the per-head weights `alpha` by
`beta ** loss`. That last update runs with autograd on, so `alpha` joins the
graph of every step's losses -- whose buffers were retained -- and carries
them into the next step: GPU memory grows for as long as the stream runs.

This program: the same structure written from scratch (four hidden layers of
256 units, a classifier head on each, mini-batches of 16 samples from a
synthetic stream); the weights are updated by hand, no torch.optim. An
iteration is short (launch-bound), so the whole run takes about a second.

Iteration: one mini-batch of the stream (one partial_fit call).
Leak: about 1.8 MB per mini-batch (every head's retained graph, kept through `alpha`; measured on the CPU as
peak RSS growth over mini-batches 10..60: 1.77 MB).
Fix: do the manual updates, the alpha update included, under torch.no_grad() (or use loss.item()).
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

FEATURES = 64
HIDDEN = 256
LAYERS = 4
CLASSES = 4
BATCH = 16


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="mini-batches of the stream (default 300)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class HedgeNetwork:
    def __init__(self, device, beta=0.99, learning_rate=0.01, smoothing=0.2):
        sizes = [FEATURES] + [HIDDEN] * LAYERS
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])).to(device)
        self.heads = nn.ModuleList(nn.Linear(HIDDEN, CLASSES) for _ in range(LAYERS)).to(device)
        self.alpha = torch.full((LAYERS,), 1.0 / LAYERS, device=device)
        self.beta = torch.tensor(beta, device=device)
        self.learning_rate = learning_rate
        self.floor = smoothing / LAYERS

    def clear_gradients(self):
        for module in list(self.hidden) + list(self.heads):
            for p in module.parameters():
                p.grad = None

    def partial_fit(self, x, y):
        activations, losses = x, []
        for layer, head in zip(self.hidden, self.heads):
            activations = F.relu(layer(activations))
            losses.append(F.cross_entropy(head(activations), y))
        hidden_updates = [torch.zeros_like(layer.weight) for layer in self.hidden]
        for index, loss in enumerate(losses):
            loss.backward(retain_graph=True)
            head = self.heads[index]
            head.weight.data -= self.learning_rate * self.alpha[index] * head.weight.grad.data
            for depth in range(index + 1):
                hidden_updates[depth] += self.alpha[index] * self.hidden[depth].weight.grad.data
            self.clear_gradients()
        for layer, update in zip(self.hidden, hidden_updates):
            layer.weight.data -= self.learning_rate * update
        for index, loss in enumerate(losses):
            self.alpha[index] *= torch.pow(self.beta, loss)  # LEAK: autograd-graph-kept-alive (alpha joins every step's graph)
            self.alpha[index] = torch.clamp(self.alpha[index], min=self.floor)
        self.alpha = self.alpha / self.alpha.sum()
        return float(losses[-1])


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    network = HedgeNetwork(device)
    centers = torch.randn(CLASSES, FEATURES, device=device)
    loss = 0.0
    for _ in range(args.iterations):
        y = torch.randint(0, CLASSES, (BATCH,), device=device)
        x = centers[y] + 0.5 * torch.randn(BATCH, FEATURES, device=device)
        loss = network.partial_fit(x, y)
    print("iterations=%d loss=%.4f alpha=%s" % (args.iterations, loss, [round(float(a), 3) for a in network.alpha]))


if __name__ == "__main__":
    main()
