# Source: https://github.com/meta-pytorch/torchtune/issues/904
# Reported: "When trying to perform cross validation I noticed that every fold started at a higher
#   GPU usage than the previous one ... I believe the issue comes from `get_adapter_params` in
#   `peft_utils.py`, more precisely it seems to be coming from its decorator
#   `@functools.lru_cache()`."
# Pattern: a module-level function cached with functools.lru_cache takes the model as its
#   argument: the cache keeps every model it was called with (and their parameters on the GPU)
#   for the life of the process, so each fold's model stays after the fold.
# Label: the line marked `# leak` keeps the memory (the cache).
import functools
from typing import Dict

import torch
from torch import nn


@functools.lru_cache()  # leak
def get_adapter_params(model: nn.Module) -> Dict[str, nn.Parameter]:
    adapter_params = {}
    for k, v in model.named_modules():
        if hasattr(v, "adapter_params") and callable(v.adapter_params):
            current_adapter_params = v.adapter_params()
            for n, p in v.named_parameters(recurse=True):
                if n in current_adapter_params:
                    full_key = f"{k}.{n}" if k else n
                    adapter_params.update({full_key: p})
                    current_adapter_params.remove(n)
    return adapter_params


def set_trainable_params(model: nn.Module, adapter_params: Dict[str, nn.Parameter]) -> None:
    for k, v in model.named_parameters():
        v.requires_grad_(k in adapter_params)


def cross_validate(build_model, folds, train_fold):
    for fold in folds:
        model = build_model().to("cuda")
        adapter_params = get_adapter_params(model)
        set_trainable_params(model, adapter_params)
        train_fold(model, fold)
        del model
        torch.cuda.empty_cache()
