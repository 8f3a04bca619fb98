# Shape of Lightning-AI/pytorch-lightning@7f0c3436cd3f6ad3753125672024fc415cbcb414:src/lightning/pytorch/strategies/ddp.py
# (DDPStrategy.configure_ddp and _setup_model), shortened. Clean: _setup_model wraps the
# module in DistributedDataParallel and returns it; self.model is a module, not a
# tensor, and configure_ddp runs once at setup.
import torch
from torch.nn.parallel.distributed import DistributedDataParallel


class DDPStrategy:
    def __init__(self, model, **kwargs):
        self.model = model
        self._ddp_kwargs = kwargs

    def _setup_model(self, model):
        device_ids = self.determine_ddp_device_ids()
        return DistributedDataParallel(module=model, device_ids=device_ids, **self._ddp_kwargs)

    def configure_ddp(self):
        self.model = self._setup_model(self.model)
        self._register_ddp_hooks()
