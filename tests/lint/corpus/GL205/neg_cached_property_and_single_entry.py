# functools.cached_property lives on the instance; maxsize=1 keeps only the last
# instance's entry, released by the next call.
from functools import cached_property, lru_cache

import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, 64)

    @cached_property
    def vocab_size(self):
        return self.embed.num_embeddings

    @lru_cache(maxsize=1)
    def positions(self, length, device):
        return torch.arange(length, device=device)
