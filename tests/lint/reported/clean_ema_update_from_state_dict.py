# Source: https://github.com/ultralytics/ultralytics/pull/25315 (ultralytics/utils/torch_utils.py)
# Reported: review bot: "This drops the previous .detach() ... both the foreach path and fallback
#   now record EMA updates in autograd, making EMA tensors part of an ever-growing graph"; author:
#   "state_dict() with the default keep_vars=False already detaches every tensor it returns";
#   merged without the .detach() and without torch.no_grad().
# Label: clean. Both sides of the in-place lerp come from state_dict(), which returns detached
#   tensors, so no graph is recorded and the EMA copy keeps a fixed size.
import math
from copy import deepcopy

import torch
from torch import nn

_TORCH_VERSION = tuple(int(x) for x in torch.__version__.split(".")[:2])
TORCH_2_0 = _TORCH_VERSION >= (2, 0)
TORCH_2_4 = _TORCH_VERSION >= (2, 4)


def unwrap_model(m: nn.Module) -> nn.Module:
    while isinstance(m, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
        m = m.module
    return m


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000, updates=0):
        self.ema = deepcopy(unwrap_model(model)).eval()  # FP32 EMA
        self.updates = updates
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)
        self.enabled = True

    def update(self, model):
        if self.enabled:
            self.updates += 1
            d = self.decay(self.updates)

            msd = unwrap_model(model).state_dict()  # model state_dict
            ema_v, model_v = [], []
            for k, v in self.ema.state_dict().items():
                if v.dtype.is_floating_point:  # true for FP16 and FP32
                    ema_v.append(v)
                    model_v.append(msd[k])
            if ema_v and TORCH_2_0 and (TORCH_2_4 or ema_v[0].device.type != "mps"):
                torch._foreach_lerp_(ema_v, model_v, 1 - d)  # one kernel launch per op
            else:  # _foreach_lerp_ needs torch>=2.0 and, on MPS, torch>=2.4
                for v, m in zip(ema_v, model_v):
                    v.mul_(d).add_(m, alpha=1 - d)


def train(model, optimizer, loader, criterion, epochs):
    ema = ModelEMA(model)
    for epoch in range(epochs):
        for imgs, targets in loader:
            loss = criterion(model(imgs.cuda()), targets.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ema.update(model)
    return ema.ema
