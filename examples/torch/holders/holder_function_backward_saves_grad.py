"""A custom autograd Function whose backward keeps every incoming gradient.

Reported: https://discuss.pytorch.org/t/save-the-gradient-of-the-intermediate-tensor/190094
("save the gradient of the intermediate tensor generated in backward for
future use": `a.append(grad_output.detach())` inside `Exp.backward`). The
shape is the post's, in a loop: `Exp.backward` appends `grad_output` to the
module-level list `a`. The gradient reaching it is made on autograd's engine
thread by the multiplication's backward (65536 float32 = 256 KiB per step).

Holder: the list `a` (module __main__).
Fix: keep what is needed of the gradient (`grad_output.norm().item()`), or
return it from `torch.autograd.grad` instead of stashing it.
"""
import torch

from case_options import mark_step, parse_args

SIZE = 65536
a = []


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, i):
        result = torch.exp(i)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        a.append(grad_output.detach())  # KEPT: append
        return grad_output * result


def run(steps, device):
    torch.manual_seed(0)
    weights = torch.rand(SIZE, device=device)
    for _ in range(steps):
        x = torch.rand(SIZE, device=device, requires_grad=True)
        y = Exp.apply(x)
        (y * weights).sum().backward()
        mark_step()
    return len(a)


def main():
    args = parse_args(__doc__)
    print("steps=%d kept=%d" % (args.steps, run(args.steps, args.device)))


if __name__ == "__main__":
    main()
