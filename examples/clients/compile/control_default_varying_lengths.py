"""torch.compile (default mode) control: sequence lengths change, the compiler recompiles.

Reported: https://github.com/pytorch/pytorch/issues/128424 (GPU memory grows
while torch.compile meets new input lengths); with a fixed set of lengths the
growth stops once each has been seen.

Batches cycle through 8 sequence lengths (16..128 tokens). Memory in use
swings with the length and rises while new lengths arrive; nothing is kept
from one step to the next. Not a leak.

    python3 control_default_varying_lengths.py --steps 200 [--device cuda|cpu]

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per optimizer step.
"""
import argparse
import json
import time

import torch


class TinyLM(torch.nn.Module):
    def __init__(self, vocabulary=256, width=128):
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.block = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, batch_first=True,
                                                      dropout=0.0)
        self.head = torch.nn.Linear(width, vocabulary)

    def forward(self, tokens):
        return self.head(self.block(self.embed(tokens)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyLM().to(args.device)
    compiled = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    lengths = [16, 32, 48, 64, 80, 96, 112, 128]
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        length = lengths[step % len(lengths)]
        tokens = torch.randint(0, 256, (16, length + 1), generator=generator).to(args.device)
        logits = compiled(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if args.device == "cuda":
            torch.cuda.synchronize()
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)


if __name__ == "__main__":
    main()
