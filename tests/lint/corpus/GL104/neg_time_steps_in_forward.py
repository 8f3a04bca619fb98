import torch
import torch.nn as nn


class Unrolled(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.cell = nn.GRUCell(dim, dim)

    def forward(self, x, h):
        outputs = []
        for t in range(x.size(0)):
            h = self.cell(x[t], h)
            outputs.append(h)
        return torch.stack(outputs), h
