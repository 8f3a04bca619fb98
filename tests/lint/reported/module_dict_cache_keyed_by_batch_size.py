# Source: https://github.com/NVIDIA/TensorRT-LLM/pull/17332 (review of tensorrt_llm/_torch/modules/kimi_kda/_kda_decode.py)
# Reported: "_DUMMY_CACHE is a process-global dict with no eviction ... the onorm_g dummy has shape
#   (1, B, HV, 128), so a new tensor is cached for every distinct batch size seen ... steady GPU
#   memory growth".
# Pattern: a module-level dict caches CUDA tensors under a key that contains the batch size.
# Label: the line marked `# leak` keeps the memory.
from __future__ import annotations

import torch

_DUMMY_CACHE: dict = {}


def _dummy_tensor(tag, shape, dtype, device, fill=0.0):
    device = torch.device(device)
    key = (tag, shape, dtype, device.type, device.index, fill)
    tensor = _DUMMY_CACHE.get(key)
    if tensor is None:
        if fill == 0.0:
            tensor = torch.zeros(shape, dtype=dtype, device=device)
        else:
            tensor = torch.full(shape, fill, dtype=dtype, device=device)
        _DUMMY_CACHE[key] = tensor  # leak
    return tensor


def run_decode(x_q, x_v, state, onorm_g=None, bias_q=None):
    B = x_q.shape[1]
    H = x_q.shape[2]
    HV = x_v.shape[2]
    device = x_q.device
    if bias_q is None:
        bias_q = _dummy_tensor("bias_q", (H * 128,), torch.bfloat16, device)
    if onorm_g is None:
        onorm_g = _dummy_tensor("onorm_g", (1, B, HV, 128), torch.bfloat16, device)
    return torch.ops.trtllm.kda_decode(x_q, x_v, bias_q, onorm_g, state)
