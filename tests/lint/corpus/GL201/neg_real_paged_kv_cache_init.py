# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/generation/continuous_batching/cache.py (PagedAttentionCache.__init__),
# shortened. Clean: one key and one value tensor per layer group, allocated once.
import torch


class PagedAttentionCache:
    def __init__(self, config, device, dtype=torch.float16, group_size=1):
        self.device = device
        self.dtype = dtype
        self.cache_shape = (config.num_blocks * config.block_size, config.num_heads, config.head_dim)
        self.key_cache: list[torch.Tensor] = []
        self.value_cache: list[torch.Tensor] = []
        for _ in range(group_size):
            new_layer_key_cache = torch.empty(self.cache_shape, dtype=self.dtype, device=self.device)
            new_layer_value_cache = torch.empty(self.cache_shape, dtype=self.dtype, device=self.device)
            self.key_cache.append(new_layer_key_cache)
            self.value_cache.append(new_layer_value_cache)
