import torch


class LastBatch:
    def __init__(self):
        self.last = {}

    def keep(self, logits):
        self.last["logits"] = logits.detach()
