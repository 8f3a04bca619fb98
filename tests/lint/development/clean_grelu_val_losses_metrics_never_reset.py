# Source: https://github.com/Genentech/gReLU/pull/8 (merge commit 1477f4ca661c44e788baf841cb11c3b794eb8de5, commits 79091e6 and a2cebed), file src/grelu/lightning/__init__.py (after the fix)
# Reported: "Reset val_losses, val_metrics, test_losses, test_metrics at the end of val/test set so that it does not carry forward to subsequent epochs" (commit: "Reset val/test metrics and losses after every epoch")
# Pattern: the epoch-end hooks reset the metric collections and rebind self.val_losses = [] / self.test_losses = [] after computing, and train_on_dataset resets val_metrics after the first validation pass, so the lists and metric states hold one epoch at most.
# Label: control: nothing here keeps GPU memory across steps
"""
The LightningModel class.
"""

import warnings
from collections import defaultdict
from datetime import datetime
from typing import Callable, List, Optional, Tuple, Union

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
from einops import rearrange
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger, WandbLogger
from torch import Tensor, nn, optim
from torch.utils.data import DataLoader
from torchmetrics import AUROC, Accuracy, AveragePrecision, MetricCollection

import grelu.model.models
from grelu.data.dataset import (
    ISMDataset,
    LabeledSeqDataset,
    MotifScanDataset,
    PatternMarginalizeDataset,
    VariantDataset,
    VariantMarginalizeDataset,
)
from grelu.lightning.losses import PoissonMultinomialLoss
from grelu.lightning.metrics import MSE, BestF1, PearsonCorrCoef
from grelu.model.heads import ConvHead
from grelu.sequence.format import strings_to_one_hot
from grelu.utils import get_aggfunc, get_compare_func, make_list

default_train_params = {
    "task": "binary",  # binary, multiclass, or regression
    "lr": 1e-4,
    "optimizer": "adam",
    "batch_size": 512,
    "num_workers": 1,
    "devices": "cpu",
    "logger": None,
    "save_dir": ".",
    "max_epochs": 1,
    "checkpoint": True,
    "loss": "bce",
    "clip": 0,
    "pos_weight": None,
    "class_weights": None,
    "total_weight": None,
}


class LightningModel(pl.LightningModule):
    """
    Wrapper for predictive sequence models

    Args:
        model_params: Dictionary of parameters specifying model architecture
        train_params: Dictionary specifying training parameters
        data_params: Dictionary specifying parameters of the training data.
            This is empty by default and will be filled at the time of
            training.
    """

    def __init__(
        self, model_params: dict, train_params: dict = {}, data_params: dict = {}
    ) -> None:
        super().__init__()

        self.save_hyperparameters(ignore=["model"])

        # Add default training parameters
        for key in default_train_params.keys():
            if key not in train_params:
                train_params[key] = default_train_params[key]
            if key in ["loss", "task", "optimizer"]:
                train_params[key] = train_params[key].lower()

        # Save params
        self.model_params = model_params
        self.train_params = train_params
        self.data_params = data_params

        # Build model
        self.build_model()

        # Set up loss function
        self.initialize_loss()

        # Set up activation function
        self.initialize_activation()

        # Inititalize metrics
        self.initialize_metrics()

        # Initialize prediction transform
        self.reset_transform()

    def build_model(self) -> None:
        """
        Build a model from parameter dictionary
        """
        model_type = self.model_params["model_type"]
        if hasattr(grelu.model.models, model_type):
            self.model = getattr(grelu.model.models, model_type)
        else:
            raise Exception("Unknown model type")

        self.model = self.model(
            **{k: v for k, v in self.model_params.items() if k not in ["model_type"]}
        )

    def initialize_loss(self) -> None:
        """
        Create the specified loss function.
        """
        # Losses always accept logits i.e. pre-activation values
        # Regression loss: Poisson or MSE
        if self.train_params["task"] == "regression":
            if self.train_params["loss"] == "poisson":
                self.loss = nn.PoissonNLLLoss(log_input=True, full=True)
            elif self.train_params["loss"] == "poisson_multinomial":
                self.loss = PoissonMultinomialLoss(
                    total_weight=self.train_params["total_weight"], log_input=True
                )
            elif self.train_params["loss"] == "mse":
                self.loss = nn.MSELoss()
            else:
                raise Exception("Regression losses: poisson, poisson_multinomial, MSE")

        # Binary: Binary cross-entropy loss
        elif self.train_params["task"] == "binary":
            if self.train_params["loss"] == "bce":
                pos_weight = self.train_params["pos_weight"]
                if pos_weight is not None:
                    pos_weight = Tensor(pos_weight).unsqueeze(1)
                self.loss = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
            else:
                raise Exception("Binary losses: bce")

        # Multiclass: Cross-entropy loss
        elif self.train_params["task"] == "multiclass":
            weight = self.train_params["class_weights"]
            if weight is not None:
                weight = Tensor(weight)
            self.loss = nn.CrossEntropyLoss(weight=weight)
        else:
            raise Exception("Task is not allowed")

    def initialize_activation(self) -> None:
        """
        Add a task-specific activation function to the model.
        """
        # Regression
        if self.train_params["task"] == "regression":
            if self.train_params["loss"] == "poisson":
                self.activation = torch.exp
            elif self.train_params["loss"] == "mse":
                self.activation = nn.Identity()
            else:
                raise Exception("Regression losses: poisson, MSE")

        # Binary
        elif self.train_params["task"] == "binary":
            self.activation = torch.sigmoid

        # Multiclass
        elif self.train_params["task"] == "multiclass":
            self.activation = nn.Softmax(dim=1)
        else:
            raise Exception("Defined tasks: regression, binary and multiclass")

    def initialize_metrics(self):
        """
        Initialize the appropriate metrics for the given task.
        """
        # Regression:
        if self.train_params["task"] == "regression":
            metrics = MetricCollection(
                {
                    "mse": MSE(num_outputs=self.model.head.n_tasks, average=False),
                    "pearson": PearsonCorrCoef(
                        num_outputs=self.model.head.n_tasks, average=False
                    ),
                }
            )

        # Binary classification
        elif self.train_params["task"] == "binary":
            if self.model.head.n_tasks == 1:
                metrics = MetricCollection(
                    {
                        "accuracy": Accuracy("binary", average=None),
                        "avgprec": AveragePrecision("binary", average=None),
                        "auroc": AUROC("binary", average=None),
                        "best_f1": BestF1(
                            num_labels=self.model.head.n_tasks, average=False
                        ),
                    }
                )
            else:
                metrics = MetricCollection(
                    {
                        "accuracy": Accuracy(
                            task="multilabel",
                            num_labels=self.model.head.n_tasks,
                            average=None,
                        ),
                        "avgprec": AveragePrecision(
                            "multilabel",
                            num_labels=self.model.head.n_tasks,
                            average=None,
                        ),
                        "auroc": AUROC(
                            "multilabel",
                            num_labels=self.model.head.n_tasks,
                            average=None,
                        ),
                        "best_f1": BestF1(
                            num_labels=self.model.head.n_tasks, average=False
                        ),
                    }
                )

        # Multiclass
        elif self.train_params["task"] == "multiclass":
            metrics = MetricCollection(
                {
                    "accuracy": Accuracy(
                        task="multiclass",
                        num_classes=self.model.head.n_tasks,
                        average=None,
                    ),
                    "avgprec": AveragePrecision(
                        "multiclass", num_classes=self.model.head.n_tasks, average=None
                    ),
                    "auroc": AUROC(
                        "multiclass", num_classes=self.model.head.n_tasks, average=None
                    ),
                }
            )
        else:
            raise Exception("Defined tasks: regression, binary and multiclass")

        self.val_metrics = metrics.clone(prefix="val_")
        self.test_metrics = metrics.clone(prefix="test_")
        self.val_losses = []
        self.test_losses = []

    def update_metrics(self, metrics: dict, y_hat: Tensor, y: Tensor) -> None:
        """
        Update metrics after each pass
        """
        if self.train_params["task"] == "binary":
            metrics.update(y_hat, y.type(torch.long))
        elif self.train_params["task"] == "multiclass":
            metrics.update(y_hat, y.type(torch.long).argmax(axis=1))
        else:
            metrics.update(y_hat, y)

    def format_input(self, x: Union[Tuple[Tensor, Tensor], Tensor]) -> Tensor:
        """
        Extract the one-hot encoded sequence from the input
        """
        # if x is a tuple of sequence, label, return the sequence
        if isinstance(x, Tensor):
            if x.ndim == 3:
                return x
            else:
                return x.unsqueeze(0)
        elif isinstance(x, Tuple):
            return x[0]
        else:
            raise Exception("Cannot perform forward pass on the given input format.")

    def forward(
        self,
        x: Union[Tuple[Tensor, Tensor], Tensor, str, List[str]],
        logits: bool = False,
    ) -> Tensor:
        """
        Forward pass
        """
        # Format the input as a one-hot encoded tensor
        x = self.format_input(x)

        # Run the model
        x = self.model(x)

        # forward() produces prediction (e.g. post-activation)
        # unless logits=True, which is used in loss functions
        if not logits:
            x = self.activation(x)

        # Apply transform
        x = self.transform(x)
        return x

    def training_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        x, y = batch
        logits = self.forward(x, logits=True)
        loss = self.loss(logits, y)
        self.log(
            "train_loss",
            loss,
            logger=self.train_params["logger"] is not None,
            on_step=True,
            on_epoch=True,
            prog_bar=True,
        )
        return loss

    def validation_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        x, y = batch
        logits = self.forward(x, logits=True)
        loss = self.loss(logits, y)
        y_hat = self.activation(logits)
        self.log(
            "val_loss",
            loss,
            logger=self.train_params["logger"] is not None,
            on_step=False,
            on_epoch=True,
        )
        self.update_metrics(self.val_metrics, y_hat, y)
        self.val_losses.append(loss)
        return loss

    def on_validation_epoch_end(self):
        """
        Calculate metrics for entire validation set
        """
        # Compute metrics
        val_metrics = self.val_metrics.compute()
        mean_val_metrics = {k: v.mean() for k, v in val_metrics.items()}
        # Compute loss
        losses = torch.stack(self.val_losses)
        mean_losses = torch.mean(losses)
        # Log or print
        if self.train_params["logger"] is None:
            print(mean_val_metrics)
            print(f"validation loss: {mean_losses}")
        else:
            self.log_dict(mean_val_metrics)
            self.log("val_loss", mean_losses)

        self.val_metrics.reset()
        self.val_losses = []

    def test_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        """
        Calculate metrics after a single test step
        """
        x, y = batch
        logits = self.forward(x, logits=True)
        loss = self.loss(logits, y)
        y_hat = self.activation(logits)
        self.log("test_loss", loss, logger=True, on_step=False, on_epoch=True)
        self.update_metrics(self.test_metrics, y_hat, y)
        self.test_losses.append(loss)
        return loss

    def on_test_epoch_end(self) -> None:
        """
        Calculate metrics for entire test set
        """
        self.computed_test_metrics = self.test_metrics.compute()
        self.log_dict({k: v.mean() for k, v in self.computed_test_metrics.items()})
        losses = torch.stack(self.test_losses)
        self.log("test_loss", torch.mean(losses))

        self.test_metrics.reset()
        self.test_losses = []

    def configure_optimizers(self) -> None:
        """
        Configure oprimizer for training
        """
        if self.train_params["optimizer"] == "adam":
            return optim.Adam(self.parameters(), lr=self.train_params["lr"])
        elif self.train_params["optimizer"] == "sgd":
            return optim.SGD(
                self.parameters(), lr=self.train_params["lr"], momentum=0.9
            )
        else:
            raise Exception("Unknown optimizer")

    # (... cut)

    def train_on_dataset(
        self,
        train_dataset: Callable,
        val_dataset: Callable,
        checkpoint_path: Optional[str] = None,
    ):
        """
        Train model and optionally log metrics to wandb.

        Args:
            train_dataset (Dataset): Dataset object that yields training examples
            val_dataset (Dataset) : Dataset object that yields training examples
            checkpoint_path (str): Path to model checkpoint from which to resume training.
                The optimizer will be set to its checkpointed state.

        Returns:
            PyTorch Lightning Trainer
        """
        torch.set_float32_matmul_precision("medium")

        # Checkpointing
        if self.train_params["checkpoint"] is True:
            checkpoint_callbacks = [
                ModelCheckpoint(monitor="val_loss", mode="min", save_last=True)
            ]
        elif isinstance(self.train_params["checkpoint"], dict):
            checkpoint_callbacks = [ModelCheckpoint(**self.train_params["checkpoint"])]
        else:
            raise Exception("Checkpoint type must be a bool or dict")

        # Get device
        accelerator, devices = self.parse_devices(self.train_params["devices"])

        # Set up logging
        logger = self.parse_logger()

        # Set up trainer
        trainer = pl.Trainer(
            max_epochs=self.train_params["max_epochs"],
            accelerator=accelerator,
            devices=devices,
            logger=logger,
            callbacks=checkpoint_callbacks,
            default_root_dir=self.train_params["save_dir"],
            gradient_clip_val=self.train_params["clip"],
        )

        # Make dataloaders
        train_dataloader = self.make_train_loader(train_dataset)
        val_dataloader = self.make_test_loader(val_dataset)

        if checkpoint_path is None:
            # First validation pass
            trainer.validate(model=self, dataloaders=val_dataloader)
            self.val_metrics.reset()

        # Add data parameters
        self.data_params["tasks"] = train_dataset.tasks.reset_index(
            names="name"
        ).to_dict(orient="list")

        for attr, value in self._get_dataset_attrs(train_dataset):
            self.data_params["train_" + attr] = value

        for attr, value in self._get_dataset_attrs(val_dataset):
            self.data_params["val_" + attr] = value

        # Training
        trainer.fit(
            model=self,
            train_dataloaders=train_dataloader,
            val_dataloaders=val_dataloader,
            ckpt_path=checkpoint_path,
        )
        return trainer

    # (... cut)
