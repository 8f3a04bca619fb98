"""Streaming recognition loop that carries the LSTM state from chunk to chunk without detaching it.

Sources:
  https://github.com/pytorch/pytorch/issues/2198  ("Memory leak problem in LSTM and RNN": "`hidden` will
      prevent any part of the graph from being freed, so it will be saving state for backward over the whole
      sequence. Adding a periodical `.detach_()` ... won't fill up the whole memory")
  https://github.com/mravanelli/pytorch-kaldi/pull/41  ("Fixing accumulating GPU memory leak during forward
      pass": "hidden state graphs continue to accumulate across minibatches unless this is handled")

What was reported: speech models run chunk by chunk pass the recurrent state
of one chunk into the next. Outside of training the forward pass still ran
with autograd on, so each chunk's graph hung off the state handed to the next
chunk, and GPU memory grew steadily during decoding of the dev set.

This program: eight audio streams are decoded together; each iteration takes
the next chunk of 8..32 feature frames (the length depends on the data, as
voice-activity chunking gives), runs a two-layer LSTM with the state carried
over, and keeps only the best label per frame as Python ints. model.eval(),
but no torch.no_grad() and no detach().

Iteration: one chunk of the stream (8 streams x 8..32 frames).
Leak: about 3 MB per chunk (the LSTM's saved gates and inputs; measured on the CPU as peak RSS growth over
chunks 5..25: 3.25 MB; cuDNN saves a reserve space instead, so the GPU figure differs).
Fix: decode under torch.no_grad() (or hand the next chunk `(h.detach(), c.detach())`).
"""
import argparse
import random
import sys

import torch
from torch import nn

STREAMS = 8
FEATURES = 40
HIDDEN = 256
LABELS = 48


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="chunks (default 200)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class StreamingRecognizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, num_layers=2, batch_first=True)
        self.output = nn.Linear(HIDDEN, LABELS)

    def forward(self, frames, state):
        hidden, state = self.lstm(frames, state)
        return self.output(hidden), state


def main():
    args = parse_args()
    torch.manual_seed(0)
    chunking = random.Random(1)
    device = torch.device(args.device)
    model = StreamingRecognizer().to(device).eval()
    state = None
    transcript = [[] for _ in range(STREAMS)]
    for _ in range(args.iterations):
        frames = torch.randn(STREAMS, chunking.randint(8, 32), FEATURES, device=device)
        logits, state = model(frames, state)  # LEAK: autograd-graph-kept-alive (the carried state links every chunk's graph)
        for stream, labels in enumerate(logits.argmax(dim=-1).tolist()):
            transcript[stream].extend(labels)
    print("iterations=%d frames_per_stream=%d" % (args.iterations, len(transcript[0])))


if __name__ == "__main__":
    main()
