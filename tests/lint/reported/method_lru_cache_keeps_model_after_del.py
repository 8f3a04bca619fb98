# Source: https://github.com/huggingface/transformers/issues/45412 (fixed by
#   https://github.com/huggingface/transformers/pull/45922)
# Reported: "RT-DETRv2 (and also RT-DETR) hold onto a significant amount of GPU memory which can
#   never be released" after `del model; gc.collect()`; the fix: "Lru decorators were keeping
#   references to entire models causing memory to not be freed when deleting the models".
# Pattern: functools.lru_cache applied to methods of nn.Modules; the cache belongs to the class,
#   `self` is part of every key, so each model instance (its CUDA parameters) and the cached CUDA
#   tensors stay referenced for the life of the process.
# Label: the lines marked `# leak` keep the memory (the method-level caches).
import gc
from functools import lru_cache, wraps

import torch
from torch import nn


def is_torchdynamo_compiling():
    return torch.compiler.is_compiling()


@wraps(lru_cache)
def compile_compatible_method_lru_cache(*lru_args, **lru_kwargs):
    """LRU cache decorator from functools, disabled while torchdynamo is compiling.
    Expected to work with class methods."""

    def decorator(func):
        func_with_cache = lru_cache(*lru_args, **lru_kwargs)(func)

        @wraps(func)
        def wrapper(*args, **kwargs):
            if is_torchdynamo_compiling():
                return func(*args, **kwargs)
            return func_with_cache(*args, **kwargs)

        return wrapper

    return decorator


class RTDetrV2SinePositionEmbedding(nn.Module):
    def __init__(self, embed_dim: int = 256, temperature: int = 10000):
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature

    @compile_compatible_method_lru_cache(maxsize=32)  # leak
    def forward(self, width: int, height: int, device, dtype) -> torch.Tensor:
        grid_w = torch.arange(int(width), device=device).to(dtype)
        grid_h = torch.arange(int(height), device=device).to(dtype)
        grid_w, grid_h = torch.meshgrid(grid_w, grid_h, indexing="xy")
        pos_dim = self.embed_dim // 4
        omega = torch.arange(pos_dim, device=device).to(dtype) / pos_dim
        omega = 1.0 / (self.temperature**omega)
        out_w = grid_w.flatten()[..., None] @ omega[None]
        out_h = grid_h.flatten()[..., None] @ omega[None]
        return torch.concat([out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()], dim=1)[None, :, :]


class RTDetrV2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.backbone = nn.Conv2d(3, config.d_model, kernel_size=16, stride=16)
        self.position_embedding = RTDetrV2SinePositionEmbedding(config.d_model)

    @compile_compatible_method_lru_cache(maxsize=32)  # leak
    def generate_anchors(self, spatial_shapes=None, grid_size=0.05, device="cpu",
                         dtype=torch.float32):
        anchors = []
        for level, (height, width) in enumerate(spatial_shapes):
            grid_y, grid_x = torch.meshgrid(
                torch.arange(end=height, device=device).to(dtype),
                torch.arange(end=width, device=device).to(dtype),
                indexing="ij",
            )
            grid_xy = torch.stack([grid_x, grid_y], -1).unsqueeze(0) + 0.5
            wh = torch.ones_like(grid_xy) * grid_size * (2.0**level)
            anchors.append(torch.concat([grid_xy, wh], -1).reshape(-1, height * width, 4))
        return torch.concat(anchors, 1)

    def forward(self, pixel_values):
        features = self.backbone(pixel_values)
        height, width = features.shape[-2:]
        pos_embed = self.position_embedding(width, height, features.device, features.dtype)
        anchors = self.generate_anchors(((height, width),), device=features.device,
                                        dtype=features.dtype)
        return features.flatten(2).transpose(1, 2) + pos_embed, anchors


def main(config, pixel_values):
    device = torch.device("cuda")
    model = RTDetrV2Model(config).to(device)
    with torch.no_grad():
        outputs = model(pixel_values.to(device))
    print("after inference:", torch.cuda.memory_allocated())
    del outputs
    del model
    gc.collect()
    torch.cuda.empty_cache()
    print("after del:", torch.cuda.memory_allocated())  # still holds the model
