# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/cache_utils.py (LinearAttentionCacheLayerMixin.offload and
# prefetch, LinearAttentionLayer.lazy_initialization), shortened. Clean: each state slot
# (one per state index) is replaced by a copy of itself on another device, or
# initialised once.
import torch


class LinearAttentionLayer:
    def __init__(self, number_of_states):
        self.number_of_states = number_of_states
        self.device = None
        self.conv_states = [None] * number_of_states
        self.is_conv_states_initialized = [False] * number_of_states

    def offload(self):
        for i in range(self.number_of_states):
            if self.is_conv_states_initialized[i]:
                self.conv_states[i] = self.conv_states[i].to("cpu", non_blocking=True)

    def prefetch(self):
        for i in range(self.number_of_states):
            if self.is_conv_states_initialized[i] and self.conv_states[i].device != self.device:
                self.conv_states[i] = self.conv_states[i].to(self.device, non_blocking=True)

    def lazy_initialization(self, conv_states=None, state_idx=0):
        if conv_states is not None:
            self.device = conv_states.device
            self.conv_states[state_idx] = torch.zeros(
                conv_states.shape, dtype=conv_states.dtype, device=conv_states.device
            )
            self.is_conv_states_initialized[state_idx] = True
