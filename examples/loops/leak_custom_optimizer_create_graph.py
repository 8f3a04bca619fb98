"""Hand-written second-order optimizer (not a torch.optim.Optimizer) whose gradients keep their graphs.

Sources:
  https://github.com/kozistr/pytorch_optimizer/issues/278  ("SophiaH implementation is not correct": "a
      serious memory leak ... standard CUDA out-of-memory errors", with PyTorch's warning "Using backward()
      with create_graph=True will create a reference cycle between the parameter and its gradient which can
      cause a memory leak ... make sure to reset the .grad fields of your parameters to None after use")
  https://github.com/jettify/pytorch-optimizer/issues/358  ("GPU memory leak in adahessian optimizer?":
      "my GPU memory would increase until it used all my GPU memory as the optimizer operated"; the reporter
      points at `retain_graph=True` in the Hessian trace and suggests @torch.no_grad() on the step)

What was reported: Hessian-based optimizers (AdaHessian, Sophia-H) need
`loss.backward(create_graph=True)` so that the step can take a Hessian-vector
product of the gradients. When the gradients are then only zeroed in place,
never set to None, each backward adds the new gradient to the old one through
the graph, and every step's double-backward graph stays alive.

This program: a training loop over random batches with a small MLP and a
hand-written `HutchinsonSGD` class -- it does not derive from
torch.optim.Optimizer and no torch.optim class is used -- with its own
zero_grad() (in place, `p.grad.zero_()`) and a step() that estimates the
Hessian diagonal with one Rademacher probe (`retain_graph=True`, as in the
report) and preconditions the update with it.

Each step's Hessian-vector product also walks the graphs of all earlier steps, so steps get slower as
the run goes on (a symptom of the same leak).

Iteration: one training step (forward, backward(create_graph=True), HutchinsonSGD.step()).
Leak: about 5 MB per step (each step's double-backward graph; measured on the CPU as peak RSS growth over
steps 3..9: 4.9 MB; the GPU's kernels save a similar set).
Fix: call zero_grad() with p.grad = None (or torch.autograd.grad instead of backward) and decorate step() with @torch.no_grad().
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 128
FEATURES = 256
HIDDEN = 512
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=120, help="training steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class HutchinsonSGD:
    """SGD preconditioned by a running Hutchinson estimate of the Hessian diagonal."""

    def __init__(self, params, lr=0.05, beta=0.95, eps=0.1):
        self.params = list(params)
        self.lr, self.beta, self.eps = lr, beta, eps
        self.state = {p: {"hessian": torch.zeros_like(p)} for p in self.params}

    def zero_grad(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def step(self):
        params = [p for p in self.params if p.grad is not None]
        grads = [p.grad for p in params]
        probes = [torch.randint_like(p, 2) * 2 - 1 for p in params]
        hessian_vector = torch.autograd.grad(grads, params, grad_outputs=probes, retain_graph=True)
        for p, probe, hv in zip(params, probes, hessian_vector):
            state = self.state[p]
            state["hessian"] = self.beta * state["hessian"] + (1 - self.beta) * (hv * probe).abs()
            p.data.add_(-self.lr * p.grad.detach() / (state["hessian"] + self.eps))


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                          nn.Linear(HIDDEN, CLASSES)).to(device)
    optimizer = HutchinsonSGD(model.parameters())
    for _ in range(args.iterations):
        inputs = torch.randn(BATCH, FEATURES, device=device)
        labels = torch.randint(0, CLASSES, (BATCH,), device=device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward(create_graph=True)  # LEAK: autograd-graph-kept-alive (grads zeroed in place keep every step's graph)
        optimizer.step()
    print("iterations=%d loss=%.4f" % (args.iterations, loss.item()))


if __name__ == "__main__":
    main()
