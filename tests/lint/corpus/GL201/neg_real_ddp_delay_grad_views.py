# Shape of pytorch/pytorch:torch/nn/parallel/distributed.py
# (DistributedDataParallel._register_delay_all_reduce_hook), shortened. Clean: called once
# from __init__; one view of one buffer per parameter.
import torch
import torch.distributed as dist
from torch.nn import Module


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, delay_all_reduce_params=()):
        super().__init__()
        self.module = module
        self._delay_all_reduce_params = list(delay_all_reduce_params)
        self._delay_grad_views = []
        if self._delay_all_reduce_params:
            self._register_delay_all_reduce_hook(device_ids)

    def _register_delay_all_reduce_hook(self, device_ids):
        device = torch.device("cpu") if device_ids is None else device_ids[0]
        self._delay_grad_buffer = torch.zeros(
            sum(p.numel() for p in self._delay_all_reduce_params), device=device
        )
        offset = 0
        for param in self._delay_all_reduce_params:
            grad_view = self._delay_grad_buffer[offset : (offset + param.numel())].view(param.shape)
            self._delay_grad_views.append(grad_view)
            offset = offset + param.numel()
