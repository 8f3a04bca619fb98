# A static method's cache has no instance in its key.
from functools import lru_cache

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    @staticmethod
    @lru_cache(maxsize=4)
    def frequencies(dim, length):
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        return torch.outer(torch.arange(length).float(), inv)

    def forward(self, x):
        return x * self.frequencies(self.dim, x.shape[1]).to(x.device).cos()
