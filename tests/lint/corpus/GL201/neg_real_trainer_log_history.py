# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/trainer.py (Trainer._maybe_log_save_evaluate and
# Trainer.log), shortened. Clean: the logged values are Python numbers (`.item()`, or
# the value itself when it is not a tensor); the log history is a list of dicts of
# floats by design.
import torch


class Trainer:
    def _maybe_log_save_evaluate(self, tr_loss, grad_norm, model, epoch, start_time):
        if self.control.should_log:
            logs: dict[str, float] = {}
            tr_loss_scalar = tr_loss.mean().item()
            tr_loss -= tr_loss
            logs["loss"] = tr_loss_scalar / (self.state.global_step - self._globalstep_last_logged)
            if grad_norm is not None:
                logs["grad_norm"] = grad_norm.item() if isinstance(grad_norm, torch.Tensor) else grad_norm
            self.log(logs, start_time)

    def log(self, logs, start_time=None):
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        output = {**logs, "step": self.state.global_step}
        self.state.log_history.append(output)

    def _inner_training_loop(self, train_dataloader, model):
        for step, inputs in enumerate(train_dataloader):
            tr_loss = self.training_step(model, inputs)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.optimizer.step()
            self._maybe_log_save_evaluate(tr_loss, grad_norm, model, 0, None)
