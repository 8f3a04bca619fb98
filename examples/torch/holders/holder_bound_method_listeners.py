"""End-of-epoch listeners registered as bound methods of per-batch objects.

Reported: https://github.com/pytorch/pytorch/issues/128211 ("Memory leak when
assigning function to instance variable": a bound method stored away keeps its
`self`, and with it the object's tensors, alive). The shape here: each
validation batch builds a `BatchStats` object holding its predictions and
subscribes its bound method `stats.report` to an event bus, to be called at
the end of the epoch. The epoch is one long pass, so the bus's listener list
grows by one bound method per batch, and each keeps its `BatchStats` and its
predictions on the GPU (1024 x 256 float32 = 1 MiB per batch).

Holder: the list `listeners` (attribute of EventBus); its elements are bound
methods `BatchStats.report` whose `__self__` keeps `predictions`.
Fix: subscribe once per epoch and pass the values, or keep `.cpu()` copies
of what the report needs.
"""
import torch
from torch import nn

from case_options import mark_step, parse_args

BATCH, CLASSES = 1024, 256


class EventBus:
    def __init__(self):
        self.listeners = []

    def subscribe(self, callback):
        self.listeners.append(callback)  # KEPT: append

    def publish(self):
        for callback in self.listeners:
            callback()
        self.listeners.clear()


class BatchStats:
    def __init__(self, predictions, labels):
        self.predictions = predictions
        self.labels = labels

    def report(self):
        return (self.predictions.argmax(1) == self.labels).float().mean().item()


def validate(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, CLASSES)).to(device).eval()
    bus = EventBus()
    for _ in range(steps):
        with torch.no_grad():
            inputs = torch.randn(BATCH, 64, device=device)
            labels = torch.randint(0, CLASSES, (BATCH,), device=device)
            stats = BatchStats(model(inputs), labels)
        bus.subscribe(stats.report)
        mark_step()
    return len(bus.listeners)


def main():
    args = parse_args(__doc__)
    print("batches=%d listeners=%d" % (args.steps, validate(args.steps, args.device)))


if __name__ == "__main__":
    main()
