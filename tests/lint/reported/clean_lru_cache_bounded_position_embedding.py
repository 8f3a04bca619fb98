# Source: https://github.com/huggingface/transformers/pull/40007
# Reported: "Use lru_cache for sine pos embeddings MaskFormer ... be very careful about memory here,
#   as I believe those tensors will never be cleaned up as they reside in the cache!" - "We can
#   also decrease lru_cache max_size to 1, so that only one tensor is kept".
# Label: clean. The cache holds at most one embedding (maxsize=1).
import math
from functools import lru_cache

import torch
from torch import nn


class MaskFormerSinePositionEmbedding(nn.Module):
    def __init__(self, num_pos_feats: int = 64, temperature: int = 10000, normalize: bool = False):
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.normalize = normalize
        self.scale = 2 * math.pi

    @lru_cache(maxsize=1)
    def forward(self, shape: torch.Size, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        not_mask = torch.ones((shape[0], shape[2], shape[3]), device=device, dtype=torch.bool)
        y_embed = not_mask.cumsum(1, dtype=dtype)
        x_embed = not_mask.cumsum(2, dtype=dtype)
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.int64, device=device).to(dtype)
        dim_t = self.temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
