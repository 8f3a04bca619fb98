# In-place updates of the buffers through .data, and a cache rebuilt from sizes.
import torch
from torch import nn


class Quantizer(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("scale", torch.ones(features))
        self.positions = None

    def forward(self, x):
        self.scale.data = 0.9 * self.scale.data + 0.1 * x.abs().amax(0).data
        if self.positions is None or self.positions.shape[0] < x.shape[0]:
            self.positions = torch.arange(x.shape[0], device=x.device)
        return torch.round(x / self.scale) * self.scale
