# Source: https://github.com/sktime/pytorch-forecasting/pull/2228 (merge
#   af9b14f34cacd3ad37ded9034f6d3f66db9aee6c, after the fix), file
#   pytorch_forecasting/callbacks/predict.py (callback docstrings cut); detach and move_to_device are the
#   package's helpers from pytorch_forecasting/utils/_utils.py, pasted below the callback.
# Reported: prediction tensors stayed on the GPU for the whole predict run.
# Pattern: every stored batch value goes through move_to_device(detach(...), "cpu") before it is
#   appended, so the lists that live for the run hold host tensors.
# Label: control: nothing here keeps GPU memory across steps
from typing import Any, Optional
from warnings import warn

from lightning import Trainer
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import BasePredictionWriter
import torch



class PredictCallback(BasePredictionWriter):

    def __init__(
        self,
        mode: str = "prediction",
        return_info: list[str] | None = None,
        mode_kwargs: dict[str, Any] = None,
    ):
        super().__init__(write_interval="epoch")
        self.mode = mode
        self.return_info = return_info or []
        self.mode_kwargs = mode_kwargs or {}
        self._reset_data()

    def _reset_data(self, result: bool = True):
        self.predictions = []
        self.info = {key: [] for key in self.return_info}
        if result:
            self._result = None

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ):
        x, y = batch

        if self.mode == "raw":
            processed_output = outputs
        elif self.mode == "prediction":
            processed_output = pl_module.to_prediction(outputs, **self.mode_kwargs)
        elif self.mode == "quantiles":
            processed_output = pl_module.to_quantiles(outputs, **self.mode_kwargs)
        else:
            raise ValueError(f"Invalid prediction mode: {self.mode}")

        self.predictions.append(move_to_device(detach(processed_output), "cpu"))

        # Only pay the detach+copy cost if x or decoder_lengths are actually requested
        needs_x = any(k in ("x", "decoder_lengths") for k in self.return_info)
        x_cpu = move_to_device(detach(x), "cpu") if needs_x else None

        for key in self.return_info:
            if key == "x":
                self.info[key].append(x_cpu)
            elif key == "y":
                y_cpu = move_to_device(detach(y[0]), "cpu")
                self.info[key].append(y_cpu)
            elif key == "index":
                index_cpu = move_to_device(detach(y[1]), "cpu")
                self.info[key].append(index_cpu)
            elif key == "decoder_lengths":
                self.info[key].append(x_cpu["decoder_lengths"])
            else:
                warn(f"Unknown return_info key: {key}")

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: LightningModule):
        if self.mode == "raw" and isinstance(self.predictions[0], dict):
            keys = self.predictions[0].keys()
            collated_preds = {
                key: torch.cat([p[key] for p in self.predictions]) for key in keys
            }
        else:
            collated_preds = {"prediction": torch.cat(self.predictions)}

        final_result = collated_preds

        for key, data_list in self.info.items():
            if isinstance(data_list[0], dict):
                collated_info = {
                    k: torch.cat([d[k] for d in data_list]) for k in data_list[0].keys()
                }
            else:
                collated_info = torch.cat(data_list)
            final_result[key] = collated_info

        self._result = final_result
        self._reset_data(result=False)

    @property
    def result(self) -> dict[str, torch.Tensor]:
        if self._result is None:
            raise RuntimeError("Prediction results are not yet available.")
        return self._result


def move_to_device(
    x: dict[str, torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor]]
    | torch.Tensor
    | list[torch.Tensor]
    | tuple[torch.Tensor],
    device: str | torch.DeviceObjType,
) -> (
    dict[str, torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor]]
    | torch.Tensor
    | list[torch.Tensor]
    | tuple[torch.Tensor]
):
    """
    Move object to device.

    Parameters
    ----------
    x : dict, list, tuple, or torch.Tensor
        Object (e.g. dictionary) of tensors to move to device.
    device : str or torch.DeviceObjType
        Device, e.g. "cpu".

    Returns
    -------
    dict, list, tuple, or torch.Tensor
        Input `x` on targeted device.
    """  # noqa: E501
    if isinstance(device, str):
        if device == "mps":
            if hasattr(torch.backends, device):
                if torch.backends.mps.is_available() and torch.backends.mps.is_built():
                    device = torch.device("mps")
                else:
                    device = torch.device("cpu")
        else:
            device = torch.device(device)
    if isinstance(x, dict):
        for name in x.keys():
            x[name] = move_to_device(x[name], device=device)
    elif isinstance(x, OutputMixIn):
        for xi in x:
            move_to_device(xi, device=device)
        return x
    elif isinstance(x, torch.Tensor) and x.device != device:
        x = x.to(device)
    elif isinstance(x, tuple | list) and x[0].device != device:
        x = [move_to_device(xi, device=device) for xi in x]
    return x


def detach(
    x: dict[str, torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor]]
    | torch.Tensor
    | list[torch.Tensor]
    | tuple[torch.Tensor],
) -> (
    dict[str, torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor]]
    | torch.Tensor
    | list[torch.Tensor]
    | tuple[torch.Tensor]
):
    """
    Detach object.

    Parameters
    ----------
    x : dict, list, tuple, or torch.Tensor
        Object to detach.

    Returns
    -------
    dict, list, tuple, or torch.Tensor
        Detached object.
    """
    if isinstance(x, torch.Tensor):
        return x.detach()
    elif isinstance(x, dict):
        return {name: detach(xi) for name, xi in x.items()}
    elif isinstance(x, OutputMixIn):
        return x.__class__(**{name: detach(xi) for name, xi in x.items()})
    elif isinstance(x, tuple | list):
        return [detach(xi) for xi in x]
    else:
        return x
