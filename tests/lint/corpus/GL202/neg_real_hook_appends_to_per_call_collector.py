# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/utils/output_capturing.py (install_output_capuring_hook and
# recursively_install_hooks), shortened. Clean: one hook per submodule, installed with the
# model; it appends only into the collector of the current forward call (a context
# variable set for that call and reset after it), never into a list that outlives it.
from contextvars import ContextVar

import torch
from torch import nn

_active_collector = ContextVar("output_collector", default=None)


def install_output_capuring_hook(module: nn.Module, key: str, index: int) -> None:
    def output_capturing_hook(module, args, output):
        collected_outputs = _active_collector.get()
        if collected_outputs is None or key not in collected_outputs.keys():
            return
        if not isinstance(output, tuple):
            collected_outputs[key].append(output)
        elif output[index] is not None:
            collected_outputs[key].append(output[index])

    module.register_forward_hook(output_capturing_hook)


def recursively_install_hooks(parent_module: nn.Module, capture_tasks) -> None:
    for name, module in parent_module.named_modules():
        for key, recorder in capture_tasks:
            if isinstance(module, recorder.target_class):
                install_output_capuring_hook(module, key, recorder.index)
