# Source: https://github.com/facebookresearch/mmf/pull/560 (commit
#   b4a7f374f0b3ddcd8fb237c808f883521f3d4821, after the fix), files
#   mmf/trainers/core/reporting.py (TrainerReportingMixin) and mmf/common/meter.py (SmoothedValue,
#   Meter; docstrings and printing helpers cut)
# Reported: "Previously `meter_update_dict.update(reduced_loss_dict)` was storing the loss with the
#   gradient and computation graph."
# Pattern: update_meter runs every training step into a class-level Meter that lives for the whole
#   run; values are turned into Python numbers with .item() (in update_dict and again in
#   Meter.update) before SmoothedValue stores them, and the per-key histories are
#   deque(maxlen=window_size).
# Label: control: nothing here keeps GPU memory across steps
# Inspired from maskrcnn benchmark
from collections import defaultdict, deque

import torch


class SmoothedValue:

    def __init__(self, window_size=20):
        self.window_size = window_size
        self.reset()

    def reset(self):
        self.deque = deque(maxlen=self.window_size)
        self.averaged_value_deque = deque(maxlen=self.window_size)
        self.batch_sizes = deque(maxlen=self.window_size)
        self.total_samples = 0
        self.total = 0.0
        self.count = 0

    def update(self, value, batch_size):
        self.deque.append(value * batch_size)
        self.averaged_value_deque.append(value)
        self.batch_sizes.append(batch_size)

        self.count += 1
        self.total_samples += batch_size
        self.total += value * batch_size

    @property
    def median(self):
        d = torch.tensor(list(self.averaged_value_deque))
        return d.median().item()

    @property
    def avg(self):
        d = torch.tensor(list(self.deque))
        s = torch.tensor(list(self.batch_sizes))
        return d.sum().item() / s.sum().item()

    @property
    def global_avg(self):
        return self.total / self.total_samples

    def get_latest(self):
        return self.averaged_value_deque[-1]


class Meter:
    def __init__(self, delimiter=", "):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, update_dict, batch_size):
        for k, v in update_dict.items():
            if isinstance(v, torch.Tensor):
                if v.dim() != 0:
                    v = v.mean()
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v, batch_size)

    def update_from_meter(self, meter):
        for key, value in meter.meters.items():
            assert isinstance(value, SmoothedValue)
            self.meters[key] = value


from abc import ABC
from typing import Any, Dict, Type

import torch
from mmf.common.registry import registry
from mmf.utils.distributed import reduce_dict


class TrainerReportingMixin(ABC):
    meter: Type[Meter] = Meter()

    def update_meter(
        self, report: Dict[str, Any], meter: Type[Meter] = None, eval_mode: bool = False
    ) -> None:
        if meter is None:
            meter = self.meter

        if hasattr(report, "metrics"):
            metrics_dict = report.metrics
            reduced_metrics_dict = reduce_dict(metrics_dict)

        if not eval_mode:
            loss_dict = report.losses
            reduced_loss_dict = reduce_dict(loss_dict)

        with torch.no_grad():
            # Add metrics to meter only when mode is `eval`
            meter_update_dict = {}
            if not eval_mode:
                total_loss_key = report.dataset_type + "/total_loss"
                meter_update_dict, total_loss = self.update_dict(
                    meter_update_dict, reduced_loss_dict
                )
                registry.register(total_loss_key, total_loss)
                meter_update_dict.update({total_loss_key: total_loss})

            if hasattr(report, "metrics"):
                meter_update_dict, _ = self.update_dict(
                    meter_update_dict, reduced_metrics_dict
                )

            meter.update(meter_update_dict, report.batch_size)

    def update_dict(self, meter_update_dict, values_dict):
        total_val = 0
        for key, val in values_dict.items():
            if torch.is_tensor(val):
                if val.dim() == 1:
                    val = val.mean()

            if hasattr(val, "item"):
                val = val.item()

            meter_update_dict.update({key: val})
            total_val += val

        return meter_update_dict, total_val
