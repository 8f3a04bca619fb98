"""backward(create_graph=True) on a leaf: a reference cycle held in C++.

Reported: https://github.com/pytorch/pytorch/issues/7343 ("[memory leak]
create_graph=True w/ custom grad": `y = x.tanh(); y.backward(
torch.ones_like(y), create_graph=True); del x, y` leaves memory allocated;
the cycle is x -> x.grad -> x.grad.grad_fn (TanhBackwardBackward) -> x).
The shape is the report's, in a loop over 65536-element tensors: no Python
variable holds anything once `del x, y` has run, yet x, its gradient and the
saved tanh output stay on the GPU (3 x 256 KiB per step).

Holder: the leaf tensor `x` itself, kept by autograd's reference cycle
through `x.grad`'s graph.
Fix: use `torch.autograd.grad(y, x, grad_outputs, create_graph=True)` instead
of `backward()`, or set `x.grad = None` once the gradient is used.
"""
import torch

from case_options import mark_step, parse_args

SIZE = 65536


def run(steps, device):
    torch.manual_seed(0)
    for _ in range(steps):
        x = torch.randn(SIZE, device=device, requires_grad=True)
        y = x.tanh()
        y.backward(torch.ones_like(y), create_graph=True)  # KEPT: backward-create-graph
        del x, y
        mark_step()


def main():
    args = parse_args(__doc__)
    run(args.steps, args.device)
    print("steps=%d" % args.steps)


if __name__ == "__main__":
    main()
