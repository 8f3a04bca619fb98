# Source: https://github.com/mmcdermott/MEDS_EIC_AR/pull/141 (commit 1eb99e3e68894e2f61c698c04a362819a05617b9 "fix: detach + move predict_step tensors to CPU before returning", merge f457b8d), file src/MEDS_EIC_AR/training/module.py (after the fix)
# Reported: "`Trainer.predict` accumulates per-batch return values in a Python list across the entire predict run. With `RepeatedPredictionDataset` expanding the dataset by `n_trajectories`, leaving these tensors on the prediction device pinned per-batch GPU allocations for the full pass, which can OOM on non-trivial cohorts."
# Pattern: predict_step returns tokens.detach().cpu() and the index tensors detached on the CPU, so the per-batch results Lightning's trainer.predict keeps for the pass hold no GPU memory.
# Label: control: nothing here keeps GPU memory across steps
"""PyTorch Lightning module for the MEDS-EIC-AR autoregressive model.

:class:`MEICARModule` wraps :class:`~MEDS_EIC_AR.model.Model` and owns the optimizer / LR scheduler
construction, the next-code metric collection, the resume-safe config fingerprinting, and the
interleaved N-sample predict path that feeds :mod:`MEDS_EIC_AR.generation`. See
:mod:`MEDS_EIC_AR.training` README for a higher-level overview.
"""

import copy
import logging
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

import hydra
import lightning as L
import torch
from meds import held_out_split, train_split, tuning_split
from meds_torchdata import MEDSTorchBatch
from transformers.modeling_outputs import CausalLMOutputWithPast

from ..generation.repeated_dataset import PredictBatch
from ..model import Model
from .metrics import NextCodeMetrics

logger = logging.getLogger(__name__)

# (... cut)


class MEICARModule(L.LightningModule):
    """A LightningModule for training and evaluating the MEICAR model."""

    # (... cut)

    def __init__(
        self,
        model: Model,
        metrics: NextCodeMetrics,
        optimizer: Callable[[Iterator[torch.nn.parameter.Parameter]], torch.optim.Optimizer] | None = None,
        LR_scheduler: Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler._LRScheduler] | None = None,
    ):
        super().__init__()
        self.model = model
        self.metrics = metrics
        self.optimizer_factory = optimizer
        self.LR_scheduler_factory = LR_scheduler

        # Per-prediction generation kwargs (e.g. rolling_generation.{max_new_tokens, rolling_context_size}).
        # Intentionally NOT passed to save_hyperparameters: these are set at the start of each
        # MEICAR_generate_trajectories CLI invocation from that run's Hydra config, not baked into the
        # training-time checkpoint. A saved checkpoint can be reloaded and then driven with different
        # generation settings (different rolling budgets, different stopping criteria) without having to
        # reconcile stale training-era values.
        self.generation_kwargs: dict[str, Any] = {}

        self.save_hyperparameters(
            {
                "model": model.hparams,
                "metrics": metrics.hparams,
                "optimizer": _factory_to_dict(self.optimizer_factory),
                "LR_scheduler": _factory_to_dict(self.LR_scheduler_factory),
            }
        )

    def _log_metrics(
        self,
        loss: torch.Tensor,
        outputs: CausalLMOutputWithPast,
        batch: MEDSTorchBatch,
        stage: Literal[train_split, tuning_split, held_out_split],
    ):
        batch_size = batch.batch_size

        is_train = stage == train_split

        sync_dist = not is_train and torch.distributed.is_available() and torch.distributed.is_initialized()

        self.log(
            f"{stage}/loss",
            loss,
            on_step=is_train,
            on_epoch=True,
            prog_bar=True,
            batch_size=batch_size,
            sync_dist=sync_dist,
        )
        self.log_dict(
            {f"{stage}/{k}": v for k, v in self.metrics(outputs.logits, batch).items()},
            batch_size=batch_size,
            on_step=is_train,
            sync_dist=sync_dist,
        )

    def training_step(self, batch: MEDSTorchBatch):
        loss, outputs = self.model(batch)
        self._log_metrics(loss, outputs, batch, train_split)

        return loss

    def validation_step(self, batch):
        loss, outputs = self.model(batch)
        self._log_metrics(loss, outputs, batch, tuning_split)

        return loss

    # (... cut)

    def predict_step(self, batch: PredictBatch) -> dict[str, torch.Tensor]:
        """Produces generated trajectories for a given batch of data.

        Expects the :data:`PredictBatch` shape yielded by
        :func:`MEDS_EIC_AR.generation.collate_with_meta` — a three-tuple
        ``(batch, subject_idxs, trajectory_idxs)`` — as produced by the expanded dataset that
        ``MEICAR_generate_trajectories`` builds. The bare-``MEDSTorchBatch`` form supported by the
        prior iteration is no longer accepted; callers wanting a single trajectory per subject
        should set ``n_trajectories=1`` on :class:`RepeatedPredictionDataset`, which still yields
        this tuple shape (just with a trivial ``trajectory_idxs`` axis).

        Any keyword arguments stashed on ``self.generation_kwargs`` (typically set from the
        top-level ``generate_trajectories`` CLI before ``trainer.predict`` is invoked) are
        forwarded to :meth:`MEDS_EIC_AR.model.model.Model.generate`. This is how
        rolling-generation settings such as ``max_new_tokens`` and ``rolling_context_size`` reach
        the model at prediction time without going through the saved Lightning hparams.

        Returns a dict with:
            - ``tokens``: ``[B, L]`` generated-token tensor from the model.
            - ``subject_idxs``: ``[B]`` long tensor, which base-dataset subject each row came from.
            - ``trajectory_idxs``: ``[B]`` long tensor, which of the N trajectories-per-subject
              each row corresponds to.

        All three tensors are detached and moved to CPU before returning. ``Trainer.predict``
        accumulates per-batch returns in a Python list across the entire predict run (scaled by
        ``n_trajectories`` via the expanded dataset), so leaving them on-device would pin per-batch
        GPU allocations for the full pass and OOM on non-trivial cohorts. Downstream demux and
        ``format_trajectories`` run on CPU anyway.
        """
        mdata_batch, subject_idxs, trajectory_idxs = batch
        tokens = self.model.generate(mdata_batch, **self.generation_kwargs)
        return {
            "tokens": tokens.detach().cpu(),
            "subject_idxs": subject_idxs.detach().cpu(),
            "trajectory_idxs": trajectory_idxs.detach().cpu(),
        }
