# Source: https://github.com/luxonis/luxonis-train/pull/25 (squashed as commit 98739d4b0635243a3752cffeaf4e82a160d2138f "Metrics - Fixed Missing Reset (#25)"), files luxonis_train/attached_modules/metrics/mean_average_precision.py, luxonis_train/attached_modules/metrics/base_metric.py and luxonis_train/models/luxonis_model.py (before the fix)
# Reported: "Fixed missing `reset` for our custom / reused metrics. This was causing a memory leak responsible for failed train runs."
# Pattern: the MeanAveragePrecision metric wraps an inner torchmetrics detection.MeanAveragePrecision in self.metric and feeds it every evaluation batch's GPU boxes, scores and labels (list states); LuxonisModel.compute_metrics calls metric.reset() after each epoch, but the wrapper's inherited Metric.reset() resets only the wrapper's own states, never self.metric, so the inner lists grow every validation epoch of the run.
# Label: lines marked `# leak` keep the memory
# From luxonis_train/attached_modules/metrics/mean_average_precision.py:
import torchmetrics.detection as detection
from torch import Tensor
from torchvision.ops import box_convert

from luxonis_train.utils.types import (
    BBoxProtocol,
    Labels,
    LabelType,
    Packet,
)

from .base_metric import BaseMetric


class MeanAveragePrecision(BaseMetric, detection.MeanAveragePrecision):
    """Compute the Mean-Average-Precision (mAP) and Mean-Average-Recall (mAR) for object
    detection predictions.

    Adapted from U{Mean-Average-Precision (mAP) and Mean-Average-Recall (mAR)
    <https://lightning.ai/docs/torchmetrics/stable/detection/mean_average_precision.html>}.
    """

    def __init__(self, **kwargs):
        super().__init__(
            protocol=BBoxProtocol,
            required_labels=[LabelType.BOUNDINGBOX],
            **kwargs,
        )
        self.metric = detection.MeanAveragePrecision()

    def update(
        self,
        outputs: list[dict[str, Tensor]],
        labels: list[dict[str, Tensor]],
    ):
        self.metric.update(outputs, labels)  # leak

    def prepare(
        self, outputs: Packet[Tensor], labels: Labels
    ) -> tuple[list[dict[str, Tensor]], list[dict[str, Tensor]]]:
        label = labels[LabelType.BOUNDINGBOX]
        output_nms = outputs["boxes"]

        image_size = self.node.original_in_shape[2:]

        output_list: list[dict[str, Tensor]] = []
        label_list: list[dict[str, Tensor]] = []
        for i in range(len(output_nms)):
            output_list.append(
                {
                    "boxes": output_nms[i][:, :4],
                    "scores": output_nms[i][:, 4],
                    "labels": output_nms[i][:, 5].int(),
                }
            )

            curr_label = label[label[:, 0] == i]
            curr_bboxs = box_convert(curr_label[:, 2:], "xywh", "xyxy")
            curr_bboxs[:, 0::2] *= image_size[1]
            curr_bboxs[:, 1::2] *= image_size[0]
            label_list.append({"boxes": curr_bboxs, "labels": curr_label[:, 1].int()})

        return output_list, label_list

    def compute(self) -> tuple[Tensor, dict[str, Tensor]]:
        metric_dict = self.metric.compute()

        del metric_dict["classes"]
        del metric_dict["map_per_class"]
        del metric_dict["mar_100_per_class"]
        map = metric_dict.pop("map")

        return map, metric_dict


# From luxonis_train/attached_modules/metrics/base_metric.py:
from abc import abstractmethod

from torch import Tensor
from torchmetrics import Metric
from typing_extensions import TypeVarTuple, Unpack

from luxonis_train.attached_modules import BaseAttachedModule
from luxonis_train.utils.registry import METRICS
from luxonis_train.utils.types import Labels, Packet

Ts = TypeVarTuple("Ts")


class BaseMetric(
    BaseAttachedModule[Unpack[Ts]],
    Metric,
    register=False,
    registry=METRICS,
):
    """A base class for all metrics.

    This class defines the basic interface for all metrics. It utilizes automatic
    registration of defined subclasses to a L{METRICS} registry.
    """

    @abstractmethod
    def update(self, *args: Unpack[Ts]) -> None:
        """Updates the inner state of the metric.

        @type args: Unpack[Ts]
        @param args: Prepared inputs from the L{prepare} method.
        """
        ...

    @abstractmethod
    def compute(self) -> Tensor | tuple[Tensor, dict[str, Tensor]] | dict[str, Tensor]:
        """Computes the metric.

        @rtype: Tensor | tuple[Tensor, dict[str, Tensor]] | dict[str, Tensor]
        @return: The computed metric. Can be one of:
           - A single Tensor.
           - A tuple of a Tensor and a dictionary of submetrics.
           - A dictionary of submetrics. If this is the case, then the metric
              cannot be used as the main metric of the model.
        """
        ...

    def run_update(self, outputs: Packet[Tensor], labels: Labels) -> None:
        """Calls the metric's update method.

        Validates and prepares the inputs, then calls the metric's update method.

        @type outputs: Packet[Tensor]
        @param outputs: The outputs of the model.
        @type labels: Labels
        @param labels: The labels of the model. @raises L{IncompatibleException}: If the
            inputs are not compatible with the module.
        """
        self.validate(outputs, labels)
        self.update(*self.prepare(outputs, labels))


# From luxonis_train/models/luxonis_model.py:
from collections import defaultdict
from collections.abc import Mapping
from logging import getLogger
from typing import Literal, cast

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import (
    ModelCheckpoint,
    RichModelSummary,
)
from lightning.pytorch.utilities import rank_zero_only  # type: ignore
from torch import Size, Tensor, nn

from luxonis_train.attached_modules import (
    BaseAttachedModule,
    BaseLoss,
    BaseMetric,
    BaseVisualizer,
)
from luxonis_train.attached_modules.visualizers import (
    combine_visualizations,
    get_unnormalized_images,
)
from luxonis_train.callbacks import (
    LuxonisProgressBar,
    ModuleFreezer,
)
from luxonis_train.nodes import BaseNode
from luxonis_train.utils.config import AttachedModuleConfig, Config
from luxonis_train.utils.general import (
    DatasetMetadata,
    get_shape_packet,
    traverse_graph,
)
from luxonis_train.utils.registry import CALLBACKS, OPTIMIZERS, SCHEDULERS, Registry
from luxonis_train.utils.tracker import LuxonisTrackerPL
from luxonis_train.utils.types import Kwargs, Labels, Packet, TaskLabels

from .luxonis_output import LuxonisOutput

logger = getLogger(__name__)


class LuxonisModel(pl.LightningModule):
    """Class representing the entire model.

    This class keeps track of the model graph, nodes, and attached modules.
    The model topology is defined as an acyclic graph of nodes.
    The graph is saved as a dictionary of predecessors.

    @type save_dir: str
    @ivar save_dir: Directory to save checkpoints and logs.

    @type nodes: L{nn.ModuleDict}[str, L{LuxonisModule}]
    @ivar nodes: Nodes of the model. Keys are node names, unique for each node.

    @type graph: dict[str, list[str]]
    @ivar graph: Graph of the model in a format of a dictionary of predecessors.
        Keys are node names, values are inputs to the node (list of node names).
        Nodes with no inputs are considered inputs of the whole model.

    @type loss_weights: dict[str, float]
    @ivar loss_weights: Dictionary of loss weights. Keys are loss names, values are weights.

    @type input_shapes: dict[str, list[L{Size}]]
    @ivar input_shapes: Dictionary of input shapes. Keys are node names, values are lists of shapes
        (understood as shapes of the "feature" field in L{Packet}[L{Tensor}]).

    @type outputs: list[str]
    @ivar outputs: List of output node names.

    @type losses: L{nn.ModuleDict}[str, L{nn.ModuleDict}[str, L{LuxonisLoss}]]
    @ivar losses: Nested dictionary of losses used in the model. Each node can have multiple
        losses attached. The first key identifies the node, the second key identifies the
        specific loss.

    @type visualizers: dict[str, dict[str, L{LuxonisVisualizer}]]
    @ivar visualizers: Dictionary of visualizers to be used with the model.

    @type metrics: dict[str, dict[str, L{LuxonisMetric}]]
    @ivar metrics: Dictionary of metrics to be used with the model.

    @type dataset_metadata: L{DatasetMetadata}
    @ivar dataset_metadata: Metadata of the dataset.

    @type main_metric: str | None
    @ivar main_metric: Name of the main metric to be used for model checkpointing.
        If not set, the model with the best metric score won't be saved.
    """

    _trainer: pl.Trainer
    logger: LuxonisTrackerPL

    # (... cut)

    def forward(
        self,
        inputs: Tensor,
        task_labels: TaskLabels | None = None,
        images: Tensor | None = None,
        *,
        compute_loss: bool = True,
        compute_metrics: bool = False,
        compute_visualizations: bool = False,
    ) -> LuxonisOutput:
        """Forward pass of the model.

        Traverses the graph and step-by-step computes the outputs of each node. Each
        next node is computed only when all of its predecessors are computed. Once the
        outputs are not needed anymore, they are removed from the memory.

        @type inputs: L{Tensor}
        @param inputs: Input tensor.
        @type task_labels: L{TaskLabels} | None
        @param task_labels: Labels dictionary. Defaults to C{None}.
        @type images: L{Tensor} | None
        @param images: Canvas tensor for visualizers. Defaults to C{None}.
        @type compute_loss: bool
        @param compute_loss: Whether to compute losses. Defaults to C{True}.
        @type compute_metrics: bool
        @param compute_metrics: Whether to update metrics. Defaults to C{True}.
        @type compute_visualizations: bool
        @param compute_visualizations: Whether to compute visualizations. Defaults to
            C{False}.
        @rtype: L{LuxonisOutput}
        @return: Output of the model.
        """
        input_node_name = list(self.input_shapes.keys())[0]
        input_dict = {input_node_name: [inputs]}

        losses: dict[
            str, dict[str, Tensor | tuple[Tensor, dict[str, Tensor]]]
        ] = defaultdict(dict)
        visualizations: dict[str, dict[str, Tensor]] = defaultdict(dict)

        computed: dict[str, Packet[Tensor]] = {
            f"__{node_name}_input__": {"features": input_tensors}
            for node_name, input_tensors in input_dict.items()
        }
        for node_name, node, input_names, unprocessed in traverse_graph(
            self.graph, cast(dict[str, BaseNode], self.nodes)
        ):
            # Special input for the first node. Will be changed when
            # multiple inputs will be supported in `luxonis-ml.data`.
            if not input_names:
                input_names = [f"__{node_name}_input__"]

            node_inputs = [computed[pred] for pred in input_names]
            outputs = node.run(node_inputs)
            computed[node_name] = outputs
            labels = task_labels[self.node_tasks[node_name]] if task_labels else None

            if compute_loss and node_name in self.losses and labels is not None:
                for loss_name, loss in self.losses[node_name].items():
                    losses[node_name][loss_name] = loss.run(outputs, labels)

            if compute_metrics and node_name in self.metrics and labels is not None:
                for metric in self.metrics[node_name].values():
                    metric.run_update(outputs, labels)

            if (
                compute_visualizations
                and node_name in self.visualizers
                and images is not None
                and labels is not None
            ):
                for viz_name, visualizer in self.visualizers[node_name].items():
                    viz = combine_visualizations(
                        visualizer.run(
                            images,
                            images,
                            outputs,
                            labels,
                        ),
                    )
                    visualizations[node_name][viz_name] = viz

            for computed_name in list(computed.keys()):
                if computed_name in self.outputs:
                    continue
                for node_name in unprocessed:
                    if computed_name in self.graph[node_name]:
                        break
                else:
                    del computed[computed_name]

        outputs_dict = {
            node_name: outputs
            for node_name, outputs in computed.items()
            if node_name in self.outputs
        }

        return LuxonisOutput(
            outputs=outputs_dict, losses=losses, visualizations=visualizations
        )

    def compute_metrics(self) -> dict[str, dict[str, Tensor]]:
        """Computes metrics and returns their values.

        Goes through all metrics in the `metrics` attribute and computes their values.
        After the computation, the metrics are reset.

        @rtype: dict[str, dict[str, L{Tensor}]]
        @return: Dictionary of computed metrics. Each node can have multiple metrics
            attached. The first key identifies the node, the second key identifies
            the specific metric.
        """
        metric_results: dict[str, dict[str, Tensor]] = defaultdict(dict)
        for node_name, metrics in self.metrics.items():
            for metric_name, metric in metrics.items():
                match metric.compute():
                    case (Tensor(data=metric_value), dict(submetrics)):
                        computed_submetrics = {
                            metric_name: metric_value,
                        } | submetrics
                    case Tensor() as metric_value:
                        computed_submetrics = {metric_name: metric_value}
                    case dict(submetrics):
                        computed_submetrics = submetrics
                    case unknown:
                        raise ValueError(
                            f"Metric {metric_name} returned unexpected value of "
                            f"type {type(unknown)}."
                        )
                metric.reset()
                metric_results[node_name] |= computed_submetrics
        return metric_results

    # (... cut)

    def process_losses(
        self,
        losses_dict: dict[str, dict[str, Tensor | tuple[Tensor, dict[str, Tensor]]]],
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Processes individual losses from the model run.

        Goes over the computed losses and computes the final loss as a weighted sum of
        all the losses.

        @type losses_dict: dict[str, dict[str, Tensor | tuple[Tensor, dict[str,
            Tensor]]]]
        @param losses_dict: Dictionary of computed losses. Each node can have multiple
            losses attached. The first key identifies the node, the second key
            identifies the specific loss. Values are either single tensors or tuples of
            tensors and sublosses.
        @rtype: tuple[Tensor, dict[str, Tensor]]
        @return: Tuple of final loss and dictionary of processed sublosses. The
            dictionary is in a format of {loss_name: loss_value}.
        """
        final_loss = torch.zeros(1, device=self.device)
        training_step_output: dict[str, Tensor] = {}
        for node_name, losses in losses_dict.items():
            for loss_name, loss_values in losses.items():
                if isinstance(loss_values, tuple):
                    loss, sublosses = loss_values
                else:
                    loss = loss_values
                    sublosses = {}

                loss *= self.loss_weights[loss_name]
                final_loss += loss
                training_step_output[
                    f"loss/{node_name}/{loss_name}"
                ] = loss.detach().cpu()
                if self.cfg.trainer.log_sub_losses and sublosses:
                    for subloss_name, subloss_value in sublosses.items():
                        training_step_output[
                            f"loss/{node_name}/{loss_name}/{subloss_name}"
                        ] = subloss_value.detach().cpu()
        training_step_output["loss"] = final_loss.detach().cpu()
        return final_loss, training_step_output

    def training_step(self, train_batch: tuple[Tensor, Labels]) -> Tensor:
        """Performs one step of training with provided batch."""
        outputs = self.forward(*train_batch)
        assert outputs.losses, "Losses are empty, check if you have defined any loss"

        loss, training_step_output = self.process_losses(outputs.losses)
        self.training_step_outputs.append(training_step_output)
        return loss

    def validation_step(self, val_batch: tuple[Tensor, Labels]) -> dict[str, Tensor]:
        """Performs one step of validation with provided batch."""
        return self._evaluation_step("val", val_batch)

    def test_step(self, test_batch: tuple[Tensor, Labels]) -> dict[str, Tensor]:
        """Performs one step of testing with provided batch."""
        return self._evaluation_step("test", test_batch)

    def on_train_epoch_end(self) -> None:
        """Performs train epoch end operations."""
        epoch_train_losses = self._average_losses(self.training_step_outputs)
        for module in self.modules():
            if isinstance(module, (BaseNode, BaseLoss)):
                module._epoch = self.current_epoch

        for key, value in epoch_train_losses.items():
            self.log(f"train/{key}", value, sync_dist=True)

        self.training_step_outputs.clear()

    def on_validation_epoch_end(self) -> None:
        """Performs validation epoch end operations."""
        return self._evaluation_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        """Performs test epoch end operations."""
        return self._evaluation_epoch_end("test")

    def get_status(self) -> tuple[int, int]:
        """Returns current epoch and number of all epochs."""
        return self.current_epoch, self.cfg.trainer.epochs

    def get_status_percentage(self) -> float:
        """Returns percentage of current training, takes into account early stopping."""
        if self._trainer.early_stopping_callback:
            # model haven't yet stop from early stopping callback
            if self._trainer.early_stopping_callback.stopped_epoch == 0:
                return (self.current_epoch / self.cfg.trainer.epochs) * 100
            else:
                return 100.0
        else:
            return (self.current_epoch / self.cfg.trainer.epochs) * 100

    def _evaluation_step(
        self, mode: Literal["test", "val"], batch: tuple[Tensor, Labels]
    ) -> dict[str, Tensor]:
        inputs, labels = batch
        images = None
        if self._logged_images < self.cfg.trainer.num_log_images:
            images = get_unnormalized_images(self.cfg, inputs)
        outputs = self.forward(
            inputs,
            labels,
            images=images,
            compute_metrics=True,
            compute_visualizations=True,
        )

        _, step_output = self.process_losses(outputs.losses)
        self.validation_step_outputs.append(step_output)

        logged_images = self._logged_images
        for node_name, visualizations in outputs.visualizations.items():
            for viz_name, viz_batch in visualizations.items():
                logged_images = self._logged_images
                for viz in viz_batch:
                    if logged_images >= self.cfg.trainer.num_log_images:
                        break
                    self.logger.log_image(
                        f"{mode}/visualizations/{node_name}/{viz_name}/{logged_images}",
                        viz.detach().cpu().numpy().transpose(1, 2, 0),
                        step=self.current_epoch,
                    )
                    logged_images += 1
        self._logged_images = logged_images

        return step_output

    def _evaluation_epoch_end(self, mode: Literal["test", "val"]) -> None:
        epoch_val_losses = self._average_losses(self.validation_step_outputs)

        for key, value in epoch_val_losses.items():
            self.log(f"{mode}/{key}", value, sync_dist=True)

        metric_results: dict[str, dict[str, float]] = defaultdict(dict)
        logger.info(f"Computing metrics on {mode} subset ...")
        computed_metrics = self.compute_metrics()
        logger.info("Metrics computed.")
        for node_name, metrics in computed_metrics.items():
            for metric_name, metric_value in metrics.items():
                metric_results[node_name][metric_name] = metric_value.cpu().item()
                self.log(
                    f"{mode}/metric/{node_name}/{metric_name}",
                    metric_value,
                    sync_dist=True,
                )

        if self.cfg.trainer.verbose:
            self._print_results(
                stage="Validation" if mode == "val" else "Test",
                loss=epoch_val_losses["loss"],
                metrics=metric_results,
            )

        self.validation_step_outputs.clear()
        self._logged_images = 0

    # (... cut)

    def _average_losses(
        self, step_outputs: list[Mapping[str, Tensor | float | int]]
    ) -> dict[str, float]:
        avg_losses: dict[str, float] = defaultdict(float)

        for step_output in step_outputs:
            for key, value in step_output.items():
                avg_losses[key] += float(value)

        for key in avg_losses:
            avg_losses[key] /= len(step_outputs)
        return avg_losses
