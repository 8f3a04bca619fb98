# Source: https://github.com/flashinfer-ai/flashinfer/pull/3709 ("Fix unbounded weight-cache
#   growth in b12x MoE", fixes issue #3354); file
#   flashinfer/fused_moe/cute_dsl/blackwell_sm12x/moe_dispatch.py after the fix (excerpt:
#   _register_cache_eviction, _WEIGHT_CACHE and _get_weight_views; the cute pointer helpers are
#   imported)
# Reported: "Tie each cache entry's lifetime to the source weight tensors via weakref.finalize, so
#   an entry is evicted as soon as the weights it was derived from are garbage-collected."
# Pattern: look-alike of the leak: still a module-level dict keyed by data_ptr() values that is
#   filled on a miss, but an entry now holds only the buffers derived from the weights (scale
#   factors, fp32 alphas), never the source weights, and weakref.finalize on every source
#   tensor pops the entry when that tensor is collected. The views returned to the caller are
#   rebuilt on each call and not cached.
# Label: control: nothing here keeps GPU memory across calls
from __future__ import annotations

import weakref
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


def _register_cache_eviction(cache: Dict, key: Tuple, *source_tensors) -> None:
    """Evict ``key`` when a source weight tensor is collected, so the cache
    follows the weights' lifetime instead of growing for the whole process.
    """
    for tensor in source_tensors:
        if tensor is not None:
            weakref.finalize(tensor, cache.pop, key, None)


_WEIGHT_CACHE: Dict[Tuple, Tuple] = {}


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
    if cached is None:
        # Cache the fresh buffers (scale factors + fp32 alphas).
        w1_rows = w1_fp4.shape[1]  # 2*n for gated, n for non-gated
        cached = (
            convert_sf_from_mma_layout(w1_blockscale, m=w1_rows, k=k, num_groups=w1_fp4.shape[0]).contiguous(),
            convert_sf_from_mma_layout(w2_blockscale, m=k, k=n, num_groups=w2_fp4.shape[0]).contiguous(),
            w1_alphas.contiguous().to(torch.float32),
            w2_alphas.contiguous().to(torch.float32),
        )
        _WEIGHT_CACHE[key] = cached
        _register_cache_eviction(
            _WEIGHT_CACHE, key, w1_fp4, w1_blockscale, w1_alphas, w2_fp4, w2_blockscale, w2_alphas,
        )
    w13_sf_contiguous, down_sf_contiguous, w1_alpha, w2_alpha = cached

    # Permute [E, w1_rows, k//2] -> [w1_rows, k//2, E] (view, no copy).
    sf_dtype = cutlass.Float8E4M3FN
    w13 = w1_fp4.permute(1, 2, 0)
    down = w2_fp4.permute(1, 2, 0)
    return _WeightViews(
        w13_fp4=w13.view(torch.float4_e2m1fn_x2),
        down_fp4=down.view(torch.float4_e2m1fn_x2),
        sfb_w13_ptr=make_ptr(sf_dtype, w13_sf_contiguous.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        sfb_down_ptr=make_ptr(sf_dtype, down_sf_contiguous.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        w1_alpha=w1_alpha,
        w2_alpha=w2_alpha,
        w1_storage=w1_fp4,
        w1_scale_storage=w13_sf_contiguous,
        w2_storage=w2_fp4,
        w2_scale_storage=down_sf_contiguous,
        _w13_sf_storage=w13_sf_contiguous,
        _down_sf_storage=down_sf_contiguous,
    )
