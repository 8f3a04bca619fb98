"""Post-processing jobs queued as functools.partial objects bound to GPU tensors.

Reported: https://github.com/pytorch/pytorch/pull/63374 (a `_PartialWrapper`
kept the arguments of its last call, and with them the module's tensors,
alive). The shape here: an inference loop queues `functools.partial(
decode_boxes, raw, anchors=...)` objects in the module-level list
`PENDING_JOBS`, for a writer thread that is only started when `--save` is
given. Without it nothing drains the queue, and every partial keeps its raw
detections on the GPU (4096 x 84 float32 = 1.3 MiB per batch).

Holder: the list `PENDING_JOBS` (module __main__); its elements are
functools.partial objects whose arguments are the kept tensors.
Fix: do not queue jobs nobody runs; queue `raw.cpu()` when a writer exists.
"""
import functools

import torch
from torch import nn

from case_options import mark_step, parse_args

ANCHORS, OUTPUTS = 4096, 84
PENDING_JOBS = []


def decode_boxes(raw, anchors):
    return raw[:, :4].sigmoid() * anchors


def predict(steps, device, save=False):
    torch.manual_seed(0)
    head = nn.Conv1d(256, OUTPUTS, kernel_size=1).to(device).eval()
    anchors = torch.rand(ANCHORS, 4, device=device)
    for _ in range(steps):
        with torch.no_grad():
            features = torch.randn(1, 256, ANCHORS, device=device)
            raw = head(features)[0].t()
        PENDING_JOBS.append(functools.partial(decode_boxes, raw, anchors=anchors))  # KEPT: append
        if save:
            PENDING_JOBS.pop(0)()
        mark_step()


def main():
    args = parse_args(__doc__)
    predict(args.steps, args.device)
    print("batches=%d queued=%d" % (args.steps, len(PENDING_JOBS)))


if __name__ == "__main__":
    main()
