# Source: https://github.com/sktime/pytorch-forecasting/issues/2224 (fixed by
#   https://github.com/sktime/pytorch-forecasting/pull/2228, merge af9b14f34cacd3ad37ded9034f6d3f66db9aee6c),
#   file pytorch_forecasting/callbacks/predict.py at the parent of that commit (docstrings cut)
# Reported: "When running model.predict() on a CUDA device, PredictCallback.on_predict_batch_end
#   collects each batch output into self.predictions without calling .detach() or .cpu() ... Every
#   prediction tensor stays pinned in VRAM until on_predict_epoch_end runs".
# Pattern: a Lightning callback appends every batch's GPU prediction (and x, y, index) to lists on
#   self that live for the whole prediction run; they are torch.cat'ed only at epoch end.
# Label: lines marked `# leak` keep the memory
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

        self.predictions.append(processed_output)  # leak

        for key in self.return_info:
            if key == "x":
                self.info[key].append(x)  # leak
            elif key == "y":
                self.info[key].append(y[0])  # leak
            elif key == "index":
                self.info[key].append(y[1])  # leak
            elif key == "decoder_lengths":
                self.info[key].append(x["decoder_lengths"])  # leak
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
