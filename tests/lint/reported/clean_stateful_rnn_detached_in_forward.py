# Source: https://github.com/fastai/fastbook/pull/469 (12_nlp_dive.ipynb, LMModel3)
# Reported: the book's stateful language model keeps self.h between batches and detaches it at the
#   end of forward().
# Label: clean. The carried state is detached every call, so it keeps no graph from earlier
#   batches.
import torch.nn.functional as F
from fastai.text.all import Module, nn


class LMModel3(Module):
    def __init__(self, vocab_sz, n_hidden):
        self.i_h = nn.Embedding(vocab_sz, n_hidden)
        self.h_h = nn.Linear(n_hidden, n_hidden)
        self.h_o = nn.Linear(n_hidden, vocab_sz)
        self.h = 0

    def forward(self, x):
        for i in range(3):
            self.h = self.h + self.i_h(x[:, i])
            self.h = F.relu(self.h_h(self.h))
        out = self.h_o(self.h)
        self.h = self.h.detach()
        return out

    def reset(self):
        self.h = 0
