"""torch.compile (default mode): the compiled model's logits kept every step.

Reported: the training loop of https://github.com/karpathy/build-nanogpt/issues/6
(torch.compile on a small GPT), with the mistake fixed in
https://github.com/TRI-ML/packnet-sfm/pull/51 ("Detach loss before appending
it to the training output list") made with the model's outputs.

Every step appends the detached logits (16 x 32 x 256 float32, 512 KiB) that
inductor's generated code allocated to `logged_logits`.

    python3 leak_default_kept_logits.py --steps 200 [--device cuda|cpu]

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
    logged_logits = []
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        tokens = torch.randint(0, 256, (16, 33), generator=generator).to(args.device)
        logits = compiled(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        logged_logits.append(logits.detach())  # LEAK: tensors-kept-alive
        if args.device == "cuda":
            torch.cuda.synchronize()
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)


if __name__ == "__main__":
    main()
