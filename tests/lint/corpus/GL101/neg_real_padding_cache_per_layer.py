# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/models/mimi/modeling_mimi.py (MimiConv1dPaddingCache.update),
# shortened. Clean: the cache has one slot per layer (layer_idx), overwritten on every
# call; the number of entries never grows past the number of layers.
import torch


class MimiConv1dPaddingCache:
    def __init__(self, num_layers, per_layer_padding):
        self.per_layer_padding = per_layer_padding
        self.padding_cache = [None] * num_layers

    def update(self, hidden_states, layer_idx):
        padding = self.per_layer_padding[layer_idx]
        if self.padding_cache[layer_idx] is None:
            current_cache = torch.zeros_like(hidden_states[:, :, :padding])
        else:
            current_cache = self.padding_cache[layer_idx]
        if padding > 0:
            padding_states = hidden_states[:, :, -padding:]
        else:
            padding_states = torch.empty(0, device=hidden_states.device)
        self.padding_cache[layer_idx] = padding_states
        return current_cache


class MimiConv1d(torch.nn.Module):
    def forward(self, hidden_states, padding_cache=None):
        if self.causal and padding_cache is not None:
            layer_padding_cache = padding_cache.update(hidden_states, self.layer_idx)
            hidden_states = torch.cat([layer_padding_cache, hidden_states], dim=2)
        return self.conv(hidden_states)
