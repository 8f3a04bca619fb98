# A project's own wrapper around lru_cache, applied to a module's method.
from functools import lru_cache, wraps

import torch
from torch import nn


def method_lru_cache(*lru_args, **lru_kwargs):
    def decorator(func):
        cached = lru_cache(*lru_args, **lru_kwargs)(func)

        @wraps(func)
        def wrapper(*args, **kwargs):
            return cached(*args, **kwargs)
        return wrapper
    return decorator


class AnchorHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(256, 4, 1)

    @method_lru_cache(maxsize=32)  # expect: GL205
    def anchors(self, shapes, device="cuda"):
        return [torch.zeros(h, w, 4, device=device) for h, w in shapes]
