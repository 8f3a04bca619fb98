# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/trainer.py (Trainer._inner_training_loop, after
# training), shortened. Clean: unwrap_model returns the module inside its wrappers;
# self.model is a module, reassigned once after the training loop.
import torch

from .modeling_utils import unwrap_model


class Trainer:
    def _inner_training_loop(self, train_dataloader):
        for step, inputs in enumerate(train_dataloader):
            loss = self.training_step(self.model, inputs)
        if self.args.torch_compile:
            self.model = unwrap_model(self.model, recursive=True)
        return loss
