# Source: https://github.com/vllm-project/llm-compressor/pull/2387 ("[Bugfix] Fix circular
#   references when activation offload device is cuda"), file
#   src/llmcompressor/pipelines/cache.py after the fix (excerpt: the cache class, its update /
#   append / delete methods and the tensor branch of _offload_value)
# Reported: "#2366 introduced a WeakKeyDictionary layer which caches shared tensors ... if the
#   value of entry is identical to the key of the entry, then the key will never be garbage
#   collected. This can occur if the user specifies sequential_offload_device="cuda" ... Fix
#   memory leak in AWQ which led to very high CUDA memory usage"
# Pattern: the same class-level WeakKeyDictionary of offloaded tensors, now guarded: an entry is
#   made only when `.to(offload_device)` produced a different tensor, so no value holds its own
#   key; each entry dies with the activation it was keyed by, and activations dropped by
#   delete() are freed.
# Label: control: nothing here keeps GPU memory across calls
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class OverrideEqMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, _types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.eq.Tensor:
            assert len(args) == 2, "Exactly 2 args must be provided"
            return torch.tensor(id(args[0]) == id(args[1]))
        return func(*args, **kwargs)


@dataclass
class IntermediateValue:
    value: Any
    device: torch.device | None


class IntermediatesCache:
    batch_intermediates: list
    offload_device: torch.device | None

    # map of onload value -> offload value
    # used to avoid excess memory usage when shared tensors are offloaded
    offload_values: WeakKeyDictionary[torch.Tensor, torch.Tensor] = WeakKeyDictionary()

    def __init__(self, batch_intermediates=None, offload_device="cpu"):
        self.batch_intermediates = batch_intermediates or []
        self.offload_device = offload_device

    def update(self, batch_index: int, values: dict[str, Any]):
        device = self.offload_device
        intermediates = {k: self._offload_value(v, device) for k, v in values.items()}
        self.batch_intermediates[batch_index].update(intermediates)

    def delete(self, batch_index: int, consumed_names: list[str] | None = None):
        intermediates = self.batch_intermediates[batch_index]
        if consumed_names is None:
            consumed_names = list(intermediates.keys())
        for name in consumed_names:
            del intermediates[name]

    def append(self, values: dict[str, Any]):
        batch_index = len(self.batch_intermediates)
        self.batch_intermediates.append({})
        self.update(batch_index, values)

    @classmethod
    def _offload_value(cls, value, offload_device, onload_device=None) -> IntermediateValue:
        kwargs = {"offload_device": offload_device, "onload_device": onload_device}
        match value:
            case torch.Tensor():
                with OverrideEqMode():
                    # check for cache hit between shared tensors
                    if value in cls.offload_values:
                        offloaded = cls.offload_values[value]
                    else:
                        # move to offload if no hit
                        offloaded = value.to(device=offload_device)
                        if offloaded is not value:  # avoid circular ref
                            cls.offload_values[value] = offloaded

                return IntermediateValue(
                    value=offloaded,
                    device=(onload_device if onload_device else value.device),
                )
            case tuple():
                return IntermediateValue(
                    value=tuple(cls._offload_value(v, **kwargs) for v in value),
                    device=None,
                )
            case dict():
                return IntermediateValue(
                    value={k: cls._offload_value(v, **kwargs) for k, v in value.items()},
                    device=None,
                )
            case _:
                return IntermediateValue(value=value, device=None)
