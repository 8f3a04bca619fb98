# Source: https://github.com/flashinfer-ai/flashinfer/issues/3354 ("b12x MoE might have a memory
#   leak"), fixed by https://github.com/flashinfer-ai/flashinfer/pull/3709 ("Fix unbounded
#   weight-cache growth in b12x MoE"); file
#   flashinfer/fused_moe/cute_dsl/blackwell_sm12x/moe_dispatch.py before the fix (excerpt:
#   _WeightViews, _WEIGHT_CACHE and _get_weight_views; the cute pointer helpers are imported)
# Reported: "_WEIGHT_CACHE: Dict[Tuple, _WeightViews] = {} caches the weights but does not delete
#   it when the context is over." PR: "Both are never evicted, so entries lived for the whole
#   process. ... _WEIGHT_CACHE stored views of the source weights, pinning that GPU memory"
# Pattern: a module-level dict keyed by the weights' data_ptr() values keeps, for every set of
#   MoE weights ever dispatched, a _WeightViews holding the source weight tensors themselves
#   (w1_storage, w2_storage, views of them) and the converted scale buffers. Nothing removes an
#   entry, so weights of models that were dropped stay on the GPU for the life of the process.
# Label: lines marked `# leak` keep the memory
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import cutlass
import cutlass.cute as cute
import torch

from flashinfer.cute_dsl.utils import (
    convert_sf_from_mma_layout,
    make_ptr,
)


@dataclass
class _WeightViews:
    w13_fp4: object = None
    down_fp4: object = None
    sfb_w13_ptr: object = None
    sfb_down_ptr: object = None
    w1_alpha: torch.Tensor | None = None
    w2_alpha: torch.Tensor | None = None
    w1_storage: torch.Tensor | None = None
    w1_scale_storage: torch.Tensor | None = None
    w2_storage: torch.Tensor | None = None
    w2_scale_storage: torch.Tensor | None = None
    _w13_sf_storage: torch.Tensor | None = None
    _down_sf_storage: torch.Tensor | None = None


_WEIGHT_CACHE: Dict[Tuple, _WeightViews] = {}


def _get_weight_views(w1_fp4, w1_blockscale, w2_fp4, w2_blockscale, w1_alphas, w2_alphas,
                      n: int, k: int, activation_precision: str = "fp4") -> _WeightViews:
    key = (
        activation_precision,
        w1_fp4.data_ptr(),
        w1_blockscale.data_ptr(),
        w1_alphas.data_ptr(),
        w2_fp4.data_ptr(),
        w2_blockscale.data_ptr(),
        w2_alphas.data_ptr(),
    )
    cached = _WEIGHT_CACHE.get(key)
    if cached is not None:
        return cached

    # Permute [E, w1_rows, k//2] -> [w1_rows, k//2, E] (view, no copy)
    w13 = w1_fp4.permute(1, 2, 0)
    down = w2_fp4.permute(1, 2, 0)

    sf_dtype = cutlass.Float8E4M3FN
    w1_rows = w1_fp4.shape[1]
    w13_sf_contiguous = convert_sf_from_mma_layout(
        w1_blockscale, m=w1_rows, k=k, num_groups=w1_fp4.shape[0]
    ).contiguous()
    down_sf_contiguous = convert_sf_from_mma_layout(
        w2_blockscale, m=k, k=n, num_groups=w2_fp4.shape[0]
    ).contiguous()

    views = _WeightViews(
        w13_fp4=w13.view(torch.float4_e2m1fn_x2),
        down_fp4=down.view(torch.float4_e2m1fn_x2),
        sfb_w13_ptr=make_ptr(sf_dtype, w13_sf_contiguous.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        sfb_down_ptr=make_ptr(sf_dtype, down_sf_contiguous.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        w1_alpha=w1_alphas.contiguous().to(torch.float32),
        w2_alpha=w2_alphas.contiguous().to(torch.float32),
        w1_storage=w1_fp4,
        w1_scale_storage=w13_sf_contiguous,
        w2_storage=w2_fp4,
        w2_scale_storage=down_sf_contiguous,
    )
    # Keep references to prevent GC of contiguous buffers
    views._w13_sf_storage = w13_sf_contiguous
    views._down_sf_storage = down_sf_contiguous
    _WEIGHT_CACHE[key] = views  # leak
    return views
