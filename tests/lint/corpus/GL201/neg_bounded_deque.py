import collections
import torch


class RecentOutputs:
    def __init__(self, size=100):
        self.items = collections.deque(maxlen=size)

    def add(self, out):
        self.items.append(out.detach().cuda())
