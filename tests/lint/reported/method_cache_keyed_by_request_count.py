# Source: https://github.com/NVIDIA/TensorRT-LLM/pull/16940 (review of deepseek_v4/flash_mla.py)
# Reported: "_fp8_token_update_grids grows without a bound. This cache is keyed on
#   (num_requests, max_tokens) and never evicts ... each entry holds two int64 CUDA tensors".
# Pattern: an attribute dict filled by a method called every forward, keyed by changing sizes.
# Label: the line marked `# leak` keeps the memory.
import torch


class FlashMLASparseCache:
    def __init__(self):
        self._fp8_token_update_grids = {}

    def _token_update_grids(self, num_requests: int, max_tokens: int, device: torch.device):
        key = (num_requests, max_tokens)
        cached = self._fp8_token_update_grids.get(key)
        if cached is not None:
            return cached
        all_slots = torch.arange(num_requests * max_tokens, device=device, dtype=torch.long)
        grids = (all_slots // max_tokens, all_slots % max_tokens)
        self._fp8_token_update_grids[key] = grids  # leak
        return grids

    def update(self, kv, num_requests, max_tokens):
        rows, cols = self._token_update_grids(num_requests, max_tokens, kv.device)
        kv[rows, cols] = 0
