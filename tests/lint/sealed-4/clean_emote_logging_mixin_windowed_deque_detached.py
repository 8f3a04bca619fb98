# Source: https://github.com/EmbarkStudios/emote/pull/122 ("enforce no logging gradients": "This
#   might be another memory leak that we're missing"), resolved by
#   https://github.com/EmbarkStudios/emote/pull/127 ("detach images", commit
#   https://github.com/EmbarkStudios/emote/commit/3c2197150e604a771013ef30457664c6ab5cab85); file
#   emote/callbacks.py after that commit (excerpt: LoggingMixin, LossCallback, TensorboardLogger)
# Reported: "I realized we already do this in most places because it's a side-effect of `detach`.
#   The only place it doesn't happen is for images. So I'll just do that in a separate PR."
# Pattern: look-alike, no growth: the loss callbacks log on every backward step into dicts owned by
#   objects that live for the whole run, but nothing there grows or keeps a graph: scalars are
#   stored as `.item()` floats and overwritten per key, windowed scalars go into a
#   `deque(maxlen=length)` per key (bounded, floats), histograms and images are stored
#   `.detach()`ed and overwritten per key (one tensor per key at most).
# Label: control: nothing here keeps GPU memory across steps
import logging
import time

from collections import deque
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from torch import Tensor, nn, optim
from torch.optim import lr_scheduler
from torch.utils.tensorboard import SummaryWriter

from .callback import Callback
from .trainer import TrainingShutdownException


class LoggingMixin:
    """A Mixin that accepts logging calls.

    Logged data is saved on this object and gets written by a
    Logger. This therefore doesn't care how the data is logged, it
    only provides a standard interface for storing the data to be
    handled by a Logger.
    """

    def __init__(self, *, default_window_length: int = 250, **kwargs):
        super().__init__(**kwargs)

        self.scalar_logs: Dict[str, Union[float, torch.Tensor]] = {}
        self.windowed_scalar: Dict[str, deque[Union[float, torch.Tensor]]] = {}
        self.windowed_scalar_cumulative: Dict[str, int] = {}
        self.image_logs: Dict[str, torch.Tensor] = {}
        self.hist_logs: Dict[str, Union[float, torch.Tensor]] = {}
        self.video_logs: Dict[str, Tuple[np.ndarray, int]] = {}

        self._default_window_length = default_window_length

    def log_scalar(self, key: str, value: Union[float, torch.Tensor]):
        """Use log_scalar to periodically log scalar data."""
        if isinstance(value, torch.Tensor):
            self.scalar_logs[key] = value.item()
        else:
            self.scalar_logs[key] = value

    def log_windowed_scalar(self, key: str, value: Union[float, torch.Tensor]):
        """Log scalars using a moving window average.

        By default this will use `default_window_length` from the constructor as the window
        length. It can also be overridden on a per-key basis using the format
        windowed[LENGTH]:foo/bar. Note that this cannot be changed between multiple invocations -
        whichever length is found first will be permanent.
        """

        if key not in self.windowed_scalar:
            # we allow windowed[100]:some_key/foobar to override window size
            if "windowed[" in key:
                p, k = key.split(":")
                length = int(key.split("[")[1][:-1])
                key = k
            else:
                length = self._default_window_length

            self.windowed_scalar[key] = deque(maxlen=length)
            self.windowed_scalar_cumulative[key] = 0

        if isinstance(value, torch.Tensor):
            self.windowed_scalar[key].append(value.item())
        else:
            self.windowed_scalar[key].append(value)

    def log_image(self, key: str, value: torch.Tensor):
        """Use log_image to periodically log image data."""
        if len(value.shape) == 3:
            self.image_logs[key] = value.detach()

    def log_video(self, key: str, value: Tuple[np.ndarray, int]):
        """Use log_scalar to periodically log scalar data."""
        self.video_logs[key] = value

    def log_histogram(self, key: str, value: torch.Tensor):
        self.hist_logs[key] = value.detach()

    def state_dict(self):
        state_dict = super().state_dict()
        state_dict["scalar_logs"] = self.scalar_logs
        state_dict["hist_logs"] = self.hist_logs
        state_dict["image_logs"] = self.image_logs
        state_dict["video_logs"] = self.video_logs
        state_dict["windowed_scalar"] = {
            k: (list(v), v.maxlen) for (k, v) in self.windowed_scalar.items()
        }
        state_dict["windowed_scalar_cumulative"] = self.windowed_scalar_cumulative
        return state_dict

    def load_state_dict(self, state_dict: Dict[str, Any]):
        self.scalar_logs = state_dict.pop("scalar_logs")
        self.hist_logs = state_dict.pop("hist_logs")
        self.video_logs = state_dict.pop("video_logs")
        self.image_logs = state_dict.pop("image_logs")
        self.windowed_scalar = {
            k: deque(v[0], maxlen=v[1]) for (k, v) in self.windowed_scalar.items()
        }
        self.windowed_scalar_cumulative = state_dict.pop("windowed_scalar_cumulative")

        super().load_state_dict(state_dict)


class LossCallback(LoggingMixin, Callback):
    """Losses are callbacks that implement a *loss function*."""

    def __init__(
        self,
        lr_schedule: Optional[optim.lr_scheduler._LRScheduler] = None,
        *,
        name: str,
        network: Optional[nn.Module],
        optimizer: Optional[optim.Optimizer],
        max_grad_norm: float,
        data_group: str,
    ):
        super().__init__()
        self.data_group = data_group
        self.name = name
        self.network = network
        self.optimizer = optimizer
        if lr_schedule is None:
            lr_schedule = lr_scheduler.ConstantLR(optimizer, factor=1.0)
        self.lr_schedule = lr_schedule
        self.parameters = [
            p for param_group in optimizer.param_groups for p in param_group["params"]
        ]
        self._max_grad_norm = max_grad_norm

    def backward(self, *args, **kwargs):
        self.optimizer.zero_grad()
        loss = self.loss(*args, **kwargs)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.parameters, self._max_grad_norm)
        self.optimizer.step()
        self.lr_schedule.step()
        self.log_scalar(f"loss/{self.name}_lr", self.lr_schedule.get_last_lr()[0])
        self.log_scalar(f"loss/{self.name}_loss", loss)
        self.log_scalar(f"loss/{self.name}_gradient_norm", grad_norm)

    def state_dict(self):
        state = super().state_dict()
        if self.optimizer:
            state["optimizer_state_dict"] = self.optimizer.state_dict()
        if self.network:
            state["network_state_dict"] = self.network.state_dict()
        return state

    def load_state_dict(self, state_dict: Dict[str, Any]):
        if self.optimizer:
            self.optimizer.load_state_dict(state_dict.pop("optimizer_state_dict"))
        if self.network:
            self.network.load_state_dict(state_dict.pop("network_state_dict"))
        super().load_state_dict(state_dict)

    @Callback.extend
    def loss(self, *args, **kwargs) -> Tensor:
        """The loss method needs to be overwritten to implement a loss.

        :return: A PyTorch tensor of shape (batch,)."""
        raise NotImplementedError


class TensorboardLogger(Callback):
    """Logs the provided loggable callbacks to tensorboard."""

    def __init__(
        self,
        callbacks: List[LoggingMixin],
        writer: SummaryWriter,
        log_interval: int,
        log_by_samples: bool = False,
    ):
        super().__init__(cycle=log_interval)
        self._cbs = callbacks
        self._writer = writer
        self._log_samples = log_by_samples

    def begin_training(self):
        self._start_time = time.monotonic()

    def end_cycle(self, bp_step, bp_samples):
        suffix = "bp_step"

        for cb in self._cbs:
            for k, v in cb.scalar_logs.items():
                if suffix:
                    k_split = k.split("/")
                    k_split[0] = k_split[0] + "_" + suffix
                    k = "/".join(k_split)

                self._writer.add_scalar(k, v, bp_step)

            for k, v in cb.windowed_scalar.items():
                if suffix:
                    k_split = k.split("/")
                    k_split[0] = k_split[0] + "_" + suffix
                    k = "/".join(k_split)

                self._writer.add_scalar(k, sum(v) / len(v), bp_step)

            for k, v in cb.windowed_scalar_cumulative.items():
                if suffix:
                    k_split = k.split("/")
                    k_split[0] = k_split[0] + "_" + suffix
                    k = "/".join(k_split)

                self._writer.add_scalar(f"{k}/cumulative", v, bp_step)

            for k, v in cb.image_logs.items():
                if suffix:
                    k_split = k.split("/")
                    k_split[0] = k_split[0] + "_" + suffix
                    k = "/".join(k_split)
                self._writer.add_image(k, v, bp_step, dataformats="HWC")

            for k, (video_array, fps) in cb.video_logs.items():
                if suffix:
                    k_split = k.split("/")
                    k_split[0] = k_split[0] + "_" + suffix
                    k = "/".join(k_split)
                self._writer.add_video(k, video_array, bp_step, fps=fps, walltime=None)

        time_since_start = time.monotonic() - self._start_time
        self._writer.add_scalar(
            "performance/bp_samples_per_sec", bp_samples / time_since_start, bp_step
        )
        self._writer.add_scalar(
            "performance/bp_steps_per_sec", bp_step / time_since_start, bp_step
        )



# (... cut: the other loggers and callbacks)
