"""Gradient accumulation over many micro-batches whose logged losses keep each micro-batch's context.

Sources:
  https://github.com/ServiceNow/Fast-LLM/pull/486  ("Fix GPU memory leak from loss tensor autograd retention":
      the loss returned by a custom autograd Function is stored in `context.losses` for logging; "each
      microbatch's losses dict entry holds a live grad_fn chain back to that microbatch's backward context
      (ctx.context in the Function), which references CUDA tensors (stage input/output pairs)"; "memory grew
      ~164 MiB per microbatch"; "The RL team needs 4K+ microbatches per step")

What was reported: a training schedule runs forward and backward of each
micro-batch inside a custom autograd Function (fused, depth-first) and keeps
the returned loss in a list for logging, to be reduced with .item() when the
optimizer step comes. The loss's grad_fn keeps the Function's context, and the
context keeps that micro-batch's input and output on the GPU, so memory grows
with every micro-batch of a step; steps of thousands of micro-batches ran out
of memory.

This program: a small language model trained with gradient accumulation:
`--micro-batches-per-step` micro-batches (default 256, so a default run is one
optimizer step, as in the report) are each run through `ForwardBackward`, a
torch.autograd.Function that does the micro-batch's forward and backward and
stashes {input, logits} on ctx; the loss it returns is appended to
`losses` (not detached). After the last micro-batch of a step, the losses are
reduced with .item(), torch.optim.SGD steps (that is how the schedule was
written; it is the only optimizer call) and the list is cleared.

Iteration: one micro-batch (an optimizer step is --micro-batches-per-step of them).
Leak: 8x64x256x4 = 524,288 B of input + 8x64x1024x4 = 2,097,152 B of logits per micro-batch (exact tensor bytes), freed only at the step.
Fix: append loss.detach() (or loss.item()), so no grad_fn reaches the context.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 8
SEQ_LEN = 64
WIDTH = 256
VOCAB = 1024


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=256, help="micro-batches (default 256)")
    parser.add_argument("--micro-batches-per-step", type=int, default=256,
                        help="micro-batches per optimizer step (default 256)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.mix = nn.Sequential(nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH))
        self.head = nn.Linear(WIDTH, VOCAB)
        self.loss_scale = nn.Parameter(torch.ones(()))


class ForwardBackward(torch.autograd.Function):
    """Runs one micro-batch's forward and backward eagerly; the returned loss carries the context for logging."""

    @staticmethod
    def forward(ctx, loss_scale, model, tokens, targets, scale):
        with torch.enable_grad():
            hidden = model.embed(tokens)
            hidden = hidden + model.mix(hidden)
            logits = model.head(hidden)
            loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1)) * model.loss_scale
            (loss * scale).backward()
        ctx.context = {"input": hidden.detach(), "logits": logits.detach()}
        return loss.detach()

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, None, None


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = TinyLM().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    logged = []
    scale = 1.0 / args.micro_batches_per_step
    for micro_batch in range(args.iterations):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ_LEN), device=device)
        targets = torch.roll(tokens, -1, dims=1)
        loss = ForwardBackward.apply(model.loss_scale, model, tokens, targets, scale)
        losses.append(loss)  # LEAK: autograd-graph-kept-alive (grad_fn keeps ctx.context: input and logits)
        if (micro_batch + 1) % args.micro_batches_per_step == 0:
            logged.append(sum(value.item() for value in losses) / len(losses))
            optimizer.step()
            optimizer.zero_grad()
            losses.clear()
    print("iterations=%d steps=%d pending=%d" % (args.iterations, len(logged), len(losses)))


if __name__ == "__main__":
    main()
