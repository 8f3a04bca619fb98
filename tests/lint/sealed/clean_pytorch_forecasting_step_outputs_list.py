# Source: https://github.com/sktime/pytorch-forecasting/pull/1924 (issues #1369, #1461), file
#   pytorch_forecasting/models/base/_base_model.py, class BaseModel (after the fix a88a4043;
#   docstrings and unrelated methods cut)
# Reported: memory profile over 5 epochs flat after the fix (plots in the PR).
# Pattern: the log dicts are detached before they are appended to the step-output lists, which are
#   cleared at every epoch end.
# Label: control: nothing here keeps GPU memory across steps
import lightning.pytorch as pl
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter, LearningRateFinder
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.parsing import get_init_args
import numpy as np
from numpy import iterable
import pandas as pd
import scipy.stats
import torch
import torch.nn as nn
from torch.nn.utils import rnn
from torch.optim.lr_scheduler import LambdaLR, ReduceLROnPlateau
from torch.utils.data import DataLoader
from tqdm.autonotebook import tqdm
import yaml

from pytorch_forecasting.metrics import (
    MAE,
    MASE,
    SMAPE,
    DistributionLoss,
    MultiHorizonMetric,
    MultiLoss,
    QuantileLoss,
    convert_torchmetric_to_pytorch_forecasting_metric,
)
from pytorch_forecasting.metrics.base_metrics import Metric
from pytorch_forecasting.models.nn.embeddings import MultiEmbedding
from pytorch_forecasting.utils import (
    InitialParameterRepresenterMixIn,
    OutputMixIn,
    TupleOutputMixIn,
    apply_to_list,
    concat_sequences,
    create_mask,
    detach,
    get_embedding_size,
    groupby_apply,
    move_to_device,
    to_list,
)

class BaseModel(InitialParameterRepresenterMixIn, LightningModule, TupleOutputMixIn):

    def __init__(
        self,
        dataset_parameters: dict[str, Any] = None,
        log_interval: Union[int, float] = -1,
        log_val_interval: Union[int, float] = None,
        learning_rate: Union[float, list[float]] = 1e-3,
        log_gradient_flow: bool = False,
        loss: Metric = SMAPE(),
        logging_metrics: nn.ModuleList = nn.ModuleList([]),
        reduce_on_plateau_patience: int = 1000,
        reduce_on_plateau_reduction: float = 2.0,
        reduce_on_plateau_min_lr: float = 1e-5,
        weight_decay: float = 0.0,
        optimizer_params: dict[str, Any] = None,
        monotone_constraints: dict[str, int] = {},
        output_transformer: Callable = None,
        optimizer="adam",
    ):

        # epoch outputs
        self.training_step_outputs = []
        self.validation_step_outputs = []
        self.testing_step_outputs = []


    def size(self) -> int:
        """
        get number of parameters in model
        """
        return sum(p.numel() for p in self.parameters())

    def training_step(self, batch, batch_idx):
        """
        Train on batch.
        """
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        self.training_step_outputs.append(detach(log))
        return log

    def on_train_epoch_end(self):
        self.on_epoch_end(self.training_step_outputs)
        self.training_step_outputs.clear()

    def predict_step(self, batch, batch_idx):
        predict_callback = [
            c for c in self.trainer.callbacks if isinstance(c, PredictCallback)
        ][0]
        x, y = batch
        _, out = self.step(x, y, batch_idx, **predict_callback.predict_kwargs)
        return out  # need to return output to be able to use predict callback

    def validation_step(self, batch, batch_idx):
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        log.update(self.create_log(x, y, out, batch_idx))
        self.validation_step_outputs.append(detach(log))
        return log

    def on_validation_epoch_end(self):
        self.on_epoch_end(self.validation_step_outputs)
        self.validation_step_outputs.clear()

    def test_step(self, batch, batch_idx):
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        log.update(self.create_log(x, y, out, batch_idx))
        self.testing_step_outputs.append(detach(log))
        return log

    def on_test_epoch_end(self):
        self.on_epoch_end(self.testing_step_outputs)
        self.testing_step_outputs.clear()

    def step(
        self,
        x: dict[str, torch.Tensor],
        y: tuple[torch.Tensor, torch.Tensor],
        batch_idx: int,
        **kwargs,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:

        # pack y sequence if different encoder lengths exist
        if (x["decoder_lengths"] < x["decoder_lengths"].max()).any():
            if isinstance(y[0], (list, tuple)):
                y = (
                    [
                        rnn.pack_padded_sequence(
                            y_part,
                            lengths=x["decoder_lengths"].cpu(),
                            batch_first=True,
                            enforce_sorted=False,
                        )
                        for y_part in y[0]
                    ],
                    y[1],
                )
            else:
                y = (
                    rnn.pack_padded_sequence(
                        y[0],
                        lengths=x["decoder_lengths"].cpu(),
                        batch_first=True,
                        enforce_sorted=False,
                    ),
                    y[1],
                )

        if self.training and len(self.hparams.monotone_constraints) > 0:
            # calculate gradient with respect to continous decoder features
            x["decoder_cont"].requires_grad_(True)
            assert not torch._C._get_cudnn_enabled(), (
                "To use monotone constraints, wrap model and training in context "
                "`torch.backends.cudnn.flags(enable=False)`"
            )
            out = self(x, **kwargs)
            prediction = out["prediction"]

            # handle multiple targets
            prediction_list = to_list(prediction)
            gradient = 0
            # todo: should monotone constrains be applicable to certain targets?
            for pred in prediction_list:
                gradient = (
                    gradient
                    + torch.autograd.grad(
                        outputs=pred,
                        inputs=x["decoder_cont"],
                        grad_outputs=torch.ones_like(pred),  # t
                        create_graph=True,  # allows usage in graph
                        allow_unused=True,
                    )[0]
                )

            # select relevant features
            indices = torch.tensor(
                [
                    self.hparams.x_reals.index(name)
                    for name in self.hparams.monotone_constraints.keys()
                ]
            )
            monotonicity = torch.tensor(
                list(self.hparams.monotone_constraints.values()),
                dtype=gradient.dtype,
                device=gradient.device,
            )
            # add additionl loss if gradient points in wrong direction
            gradient = gradient[..., indices] * monotonicity[None, None]
            monotinicity_loss = gradient.clamp_max(0).mean()
            # multiply monotinicity loss by large number
            # to ensure relevance and take to the power of 2
            # for smoothness of loss function
            monotinicity_loss = 10 * torch.pow(monotinicity_loss, 2)
            if not self.predicting:
                if isinstance(self.loss, (MASE, MultiLoss)):
                    loss = self.loss(
                        prediction,
                        y,
                        encoder_target=x["encoder_target"],
                        encoder_lengths=x["encoder_lengths"],
                    )
                else:
                    loss = self.loss(prediction, y)

                loss = loss * (1 + monotinicity_loss)
            else:
                loss = None
        else:
            out = self(x, **kwargs)

            # calculate loss
            prediction = out["prediction"]
            if not self.predicting:
                if isinstance(self.loss, (MASE, MultiLoss)):
                    mase_kwargs = dict(
                        encoder_target=x["encoder_target"],
                        encoder_lengths=x["encoder_lengths"],
                    )
                    loss = self.loss(prediction, y, **mase_kwargs)
                else:
                    loss = self.loss(prediction, y)
            else:
                loss = None
        # ensure that loss has require_grad
        if loss is not None and loss.device.type == "mps":
            loss.requires_grad_(True)
        self.log(
            f"{self.current_stage}_loss",
            detach(loss),
            on_step=self.training,
            on_epoch=True,
            prog_bar=True,
            batch_size=len(x["decoder_target"]),
        )
        log = {"loss": loss, "n_samples": x["decoder_lengths"].size(0)}
        return log, out

    def on_epoch_end(self, outputs):
        """
        Run at epoch end for training or validation. Can be overriden in models.
        """
        pass
