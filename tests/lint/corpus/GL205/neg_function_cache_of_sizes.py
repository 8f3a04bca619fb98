# The cache is keyed by sizes and the device only: no model is kept.
from functools import lru_cache

import torch


@lru_cache(maxsize=8)
def causal_mask(length, device):
    return torch.ones(length, length, device=device).tril().bool()
