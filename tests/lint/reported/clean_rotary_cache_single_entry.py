# Source: https://github.com/openai/gpt-oss/pull/43
# Reported: "adds cosine and sine cache support to the RotaryEmbedding module ... Ensured that cache
#   updates only when the sequence length increases."
# Label: clean. One cached pair per module, replaced (not added to) when a longer sequence comes.
import torch


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, head_dim: int, base: int, device: torch.device | None = None):
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        self.device = device
        self._cached_cos_sin = None
        self._cached_seq_len = 0

    def _compute_cos_sin(self, num_tokens: int):
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float, device=self.device) / self.head_dim))
        t = torch.arange(num_tokens, dtype=torch.float32, device=self.device)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        return freqs.cos(), freqs.sin()

    def _get_cos_sin(self, num_tokens: int):
        if self._cached_cos_sin is None or num_tokens > self._cached_seq_len:
            self._cached_cos_sin = self._compute_cos_sin(num_tokens)
            self._cached_seq_len = num_tokens
        cos, sin = self._cached_cos_sin
        return cos[:num_tokens], sin[:num_tokens]

    def forward(self, query: torch.Tensor, key: torch.Tensor):
        cos, sin = self._get_cos_sin(query.shape[0])
        return query * cos.unsqueeze(-2), key * sin.unsqueeze(-2)
