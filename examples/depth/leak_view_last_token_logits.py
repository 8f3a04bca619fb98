"""Training loop that keeps the last-token slice of each step's logits: a view that keeps the whole logits tensor.

Sources:
  https://github.com/huggingface/transformers/issues/34796  ("Copy of entire logits incur large memory
      usage": "Before that, the logits were sliced first and then copied, which would only incur
      negligible memory overhead", i.e. `outputs.logits[:, -1, :].clone().float()`)
  https://github.com/konstmish/prodigy/pull/22  ("Slicing creates a view to the original data, keeping
      the original data in memory ... be sure it's not just views, so that the original data can be
      garbage collected.")

What was reported: a slice such as `logits[:, -1, :]` is a view; as long as it
is referenced, the storage of the whole logits tensor (batch x sequence x
vocabulary) stays allocated. Slicing and then cloning keeps only the slice.
Issue 37 reproduced this on a GPT training script: one planted line kept the
last-token slice of each step's logits (already detached), and the report
advised "detach() before storing" although the element was a 0.8 MiB view of a
98 MiB tensor.

This program: a small GPT-like language model (vocabulary 50,304, the padded
GPT-2 size) trains with AdamW; each step appends `logits[:, -1, :].detach()`
to a list "for later analysis". Each element is a view: 4 x 50,304 floats of
its own (804,864 bytes), keeping 4 x 128 x 50,304 floats (103,022,592 bytes).

Step: one optimizer step.
Leak: 103,022,592 bytes per step (the whole logits storage, through the view).
Fix: keep `logits[:, -1, :].detach().clone()` (the slice alone) or `.cpu()` of the slice.
"""
import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 50304
WIDTH = 256
BATCH = 4
SEQ_LEN = 128


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps (default 50)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(SEQ_LEN, WIDTH)
        self.block = nn.TransformerEncoderLayer(WIDTH, 4, 4 * WIDTH, dropout=0.0, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1), device=tokens.device)
        hidden = self.embed(tokens) + self.position(positions)
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.size(1), device=tokens.device)
        return self.head(self.block(hidden, src_mask=mask, is_causal=True))


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = TinyGPT().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    last_token_logits = []
    for step in range(args.steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ_LEN + 1), device="cuda")
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        last_token_logits.append(logits[:, -1, :].detach())  # KEEP: view of the whole logits
    print("steps=%d kept=%d allocated_mib=%.1f" % (args.steps, len(last_token_logits),
                                                   torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
