import torch
import torch.nn as nn


class StatefulTagger(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.rnn = nn.GRU(dim, dim)
        self.hidden = None

    def forward(self, x):
        out, self.hidden = self.rnn(x, self.hidden)  # expect: GL104
        return out

    def reset(self):
        self.hidden = None
