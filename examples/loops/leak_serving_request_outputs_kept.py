"""Request loop that keeps every generation's output, KV cache and scores, in per-request metadata.

Sources:
  https://github.com/generative-computing/mellea/pull/544  ("fix: huggingface memory leak": "Each instruct()
      call triggers 4+ model.generate() calls ... GPU memory grew continuously because: KV caches and output
      tensors were stored in mot._meta["hf_output"] and never cleaned up")
  https://github.com/hitomi-team/sukima/issues/5  ("Memory use, especially CUDA memory use, balloons when
      generation requests are processed")

What was reported: a backend answers each request with several generate()
calls (the answer, then an LLM-as-a-judge check) and stores the raw generation
output -- with its past_key_values and per-step scores -- in the request's
metadata object, which the caller keeps. GPU memory grows with every request.

This program: a two-layer decoder with a hand-written KV cache serves a
stream of requests; each request runs two greedy generations of 24 tokens
(inference_mode, so no graph) and records {sequences, past_key_values, scores}
in `request_log[request_id]`. The log is never pruned. Inside one request the
loop decodes token by token: the allocation stream has a short inner period
(a token) inside the one a user counts (a request).

Iteration: one request (two generations of 24 tokens each).
Leak: per request 2 x (KV cache 2 layers x 2 x 4 heads x 56 x 32 x 4 B = 114,688 B; scores 24 x 4096 x 4 B = 393,216 B; sequences 448 B) ~ 1.0 MB (exact tensor bytes, before allocator rounding).
Fix: keep only the decoded text (or move what is kept to the CPU) and drop past_key_values.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 4096
WIDTH = 128
HEADS = 4
HEAD_DIM = WIDTH // HEADS
LAYERS = 2
PROMPT = 32
NEW_TOKENS = 24


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=150, help="requests (default 150)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x, past):
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        if past is not None:
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        scores = (q @ k.transpose(-1, -2)) / HEAD_DIM ** 0.5
        if past is None:  # the prompt attends causally; a decoded token sees everything before it
            causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(causal, float("-inf"))
        mixed = F.softmax(scores, dim=-1) @ v
        x = x + self.out(mixed.transpose(1, 2).reshape(batch, length, WIDTH))
        return x + self.mlp(x), (k, v)


class TinyCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(DecoderLayer() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens, past_key_values=None):
        x = self.embed(tokens)
        new_past = []
        for index, layer in enumerate(self.layers):
            x, kv = layer(x, past_key_values[index] if past_key_values else None)
            new_past.append(kv)
        return self.head(x[:, -1]), tuple(new_past)


def generate(model, prompt):
    """Greedy decoding; returns what a generate() call with output_scores returns."""
    logits, past = model(prompt)
    tokens, scores = [prompt], []
    for _ in range(NEW_TOKENS):
        scores.append(logits)
        next_token = logits.argmax(dim=-1, keepdim=True)
        tokens.append(next_token)
        logits, past = model(next_token, past)
    return {"sequences": torch.cat(tokens, dim=1), "past_key_values": past, "scores": torch.stack(scores)}


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = TinyCausalLM().to(device).eval()
    request_log = {}
    with torch.inference_mode():
        for request_id in range(args.iterations):
            prompt = torch.randint(0, VOCAB, (1, PROMPT), device=device)
            answer = generate(model, prompt)
            judge = generate(model, answer["sequences"][:, -PROMPT:])
            request_log[request_id] = {"hf_output": [answer, judge]}  # LEAK: tensors-kept-alive (KV caches and scores of both calls)
    print("iterations=%d logged=%d" % (args.iterations, len(request_log)))


if __name__ == "__main__":
    main()
