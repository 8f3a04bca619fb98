"""torch.compile(mode="reduce-overhead"): outputs cloned out of the CUDA graph pool and kept.

Reported: https://github.com/pytorch/pytorch/issues/170604 and
https://github.com/pytorch/pytorch/issues/148439 -- CUDA graph trees raise
"accessing tensor output of CUDAGraphs that has been overwritten by a
subsequent run ... To prevent overwriting, clone the tensor outside of
torch.compile()"; the user follows the advice and keeps every clone.

Each step clones the logits (16 x 32 x 256 float32, 512 KiB) out of the
graph's private pool into a list that lives for the whole run.

    python3 leak_reduce_overhead_cloned_outputs.py --steps 200 [--device cuda]

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
    kept_logits = []
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        torch.compiler.cudagraph_mark_step_begin()
        tokens = torch.randint(0, 256, (16, 33), generator=generator).to(args.device)
        logits = compiled(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        kept_logits.append(logits.detach().clone())  # LEAK: tensors-kept-alive
        if args.device == "cuda":
            torch.cuda.synchronize()
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)


if __name__ == "__main__":
    main()
