"""A live-plot helper that queues redraw closures, each capturing a GPU frame.

Reported: https://mindfulchase.com/explore/troubleshooting-tips/machine-learning-and-ai-tools/troubleshooting-pytorch-cuda-memory-leaks-and-out-of-memory-errors.html
("ghost tensors -- unfreed references due to Python closures"). The shape
here: a training loop hands every step's reconstruction to `LivePreview.queue`,
which defers the drawing: it appends a `redraw` closure to the list attribute
`_pending`, and the closures are only run (and the list cleared) when a window
is attached, which never happens in a headless job. Each closure captures the
step's reconstruction, a 64 x 3 x 32 x 32 float32 tensor on the GPU
(768 KiB per step).

Holder: the list `_pending` (attribute of LivePreview); its elements are
closures of `queue.<locals>.redraw` capturing `frame`.
Fix: capture `frame.detach().cpu()` (or a thumbnail), and drop queued
closures when no window is attached.
"""
import torch
from torch import nn

from case_options import parse_args

BATCH = 64


class LivePreview:
    def __init__(self):
        self.window = None
        self._pending = []

    def queue(self, step, frame):
        def redraw():
            self.window.show(step, frame.clamp(0, 1))

        self._pending.append(redraw)  # KEPT: append
        if self.window is not None:
            for draw in self._pending:
                draw()
            self._pending.clear()


def train(steps, device):
    torch.manual_seed(0)
    autoencoder = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 128), nn.ReLU(),
                                nn.Linear(128, 3 * 32 * 32), nn.Unflatten(1, (3, 32, 32))).to(device)
    optimizer = torch.optim.Adam(autoencoder.parameters(), lr=1e-3)
    preview = LivePreview()
    for step in range(steps):
        images = torch.rand(BATCH, 3, 32, 32, device=device)
        reconstruction = autoencoder(images)
        loss = nn.functional.mse_loss(reconstruction, images)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        preview.queue(step, reconstruction.detach())
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
