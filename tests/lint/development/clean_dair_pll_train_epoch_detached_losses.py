# Source: https://github.com/DAIRLab/dair_pll/blob/cbe88a86f476887b28ddf5318f58236cde22a494/dair_pll/experiment.py (the file at the merge of PR #20, "Periodically free memory in final evaluation"; a look-alike control from the training path that PR left as it was, no pair)
# Reported: nothing for this excerpt (PR #20 fixed trajectory_predict in the final evaluation); chosen as a control for its per-epoch loss list.
# Pattern: train_epoch appends loss.clone().detach() to a local list created at each call, calls .backward() on the undetached loss, and returns sum(losses) / len(losses): the list holds one epoch of graph-free scalars and is dropped when the method returns.
# Label: control: nothing here keeps GPU memory across steps
"""Defines interfaces for various learning experiments to be run.

Current supported experiment types include:

    * :py:class:`SupervisedLearningExperiment`: An experiment where a
      :py:class:`~dair_pll.system.System` is learned to mimic a
      dataset of trajectories.

"""
import dataclasses
import signal
import time
from abc import ABC, abstractmethod
from copy import deepcopy
from dataclasses import dataclass, field
from typing import List, Tuple, Callable, Optional, Dict, cast, Union

import numpy as np
import torch
from torch import Tensor
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from dair_pll import file_utils
from dair_pll.dataset_management import ExperimentDataManager, \
    TrajectorySet
from dair_pll.experiment_config import SupervisedLearningExperimentConfig
from dair_pll.state_space import StateSpace
from dair_pll.system import System, SystemSummary
from dair_pll.wandb_manager import WeightsAndBiasesManager

# (... cut)


class SupervisedLearningExperiment(ABC):
    # (... cut)

    def prediction_loss(self,
                        x_past: Tensor,
                        x_future: Tensor,
                        system: System,
                        keep_batch: bool = False) -> Tensor:
        r"""Default :py:data:`LossCallbackCallable` which evaluates to system's
        :math:`l_2` prediction error on batch:

        .. math::

            \mathcal{L}(x_{p,i,\cdot}, x_{f,i,\cdot}) = \sum_{j} ||\hat x_{f,
            i,j} - x_{f,i,j}||^2,

        where :math:`x_{p,i,\cdot}, x_{f,i,\cdot}` are the :math:`i`\ th
        elements of the past and future batches; and
        :math:`\hat x_{f,i,j}` is the :math:`j`-step forward prediction of the
        model from the past batch.

        See :py:data:`LossCallbackCallable` for additional type signature info.
        """
        space = self.space
        x_predicted = self.batch_predict(x_past, system)
        v_future = space.v(x_future)
        v_predicted = space.v(x_predicted)
        avg_const = v_predicted.nelement() // v_predicted.shape[0]
        if not keep_batch:
            avg_const *= x_predicted.shape[0]
        return space.velocity_square_error(v_future, v_predicted,
                                           keep_batch) / avg_const

    def batch_loss(self,
                   x_past: Tensor,
                   x_future: Tensor,
                   system: System,
                   keep_batch: bool = False) -> Tensor:
        """Runs :py:attr:`loss_callback` (a
        :py:data:`LossCallbackCallable`) on the given batch."""
        assert self.loss_callback is not None
        return self.loss_callback(x_past, x_future, system, keep_batch)

    def train_epoch(self,
                    data: DataLoader,
                    system: System,
                    optimizer: Optional[Optimizer] = None) -> Tensor:
        """Train learned model for a single epoch.  Takes gradient steps in the
        learned parameters if ``optimizer`` is provided.

        Args:
            data: Training dataset.
            system: System to be trained.
            optimizer: Optimizer which trains system.

        Returns:
            Scalar average training loss observed during epoch.
        """
        losses = []
        for xy_i in data:
            x_i: Tensor = xy_i[0]
            y_i: Tensor = xy_i[1]

            if optimizer is not None:
                optimizer.zero_grad()

            loss = self.batch_loss(x_i, y_i, system)
            losses.append(loss.clone().detach())

            if optimizer is not None:
                loss.backward()
                optimizer.step()

        avg_loss = cast(Tensor, sum(losses) / len(losses))
        return avg_loss
