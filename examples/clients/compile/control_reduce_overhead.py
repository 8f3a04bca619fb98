"""torch.compile(mode="reduce-overhead") control: CUDA graphs replayed, nothing kept.

Reported: the usage the CUDA graph trees documentation gives
(torch.compiler.cudagraph_mark_step_begin() before each invocation), as in
https://github.com/pytorch/pytorch/issues/170604; the private graph pool is
reserved once while the graphs are recorded and reused after.

Memory reserved for the graph pool rises during the first steps (warm-up and
recording) and stays. Not a leak.

    python3 control_reduce_overhead.py --steps 200 [--device cuda]

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
    compiled = torch.compile(model, mode="reduce-overhead")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        torch.compiler.cudagraph_mark_step_begin()
        tokens = torch.randint(0, 256, (16, 33), generator=generator).to(args.device)
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
