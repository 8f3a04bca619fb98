# Source: https://github.com/skorch-dev/skorch/issues/218
# Reported: "After each validation batch the GPU memory consumption increases until nothing in
#   left ... I tried wrapping the contents of validation_step() into the no_grad context, and it
#   solved my problem." (skorch 0.1: net.py and the scoring callback's prediction cache.)
# Pattern: validation runs with autograd on, and a callback caches every batch's predictions for
#   the epoch-end score.
# Label: the lines marked `# leak` keep the memory (the predictions made with autograd on, kept
#   by the cache).
import torch


class EpochScoring:
    def __init__(self, scoring, on_train=False, use_caching=True):
        self.scoring = scoring
        self.on_train = on_train
        self.use_caching = use_caching

    def on_epoch_begin(self, net, **kwargs):
        self.y_trues_ = []
        self.y_preds_ = []

    def on_batch_end(self, net, y, y_pred, training, **kwargs):
        if not self.use_caching or training != self.on_train:
            return
        if y is not None:
            self.y_trues_.append(y)
        self.y_preds_.append(y_pred)  # leak


class NeuralNet:
    def validation_step(self, Xi, yi, **fit_params):
        self.module_.eval()
        y_pred = self.infer(Xi, **fit_params)  # leak
        loss = self.get_loss(y_pred, yi, X=Xi, training=False)
        return {"loss": loss, "y_pred": y_pred}

    def infer(self, x, **fit_params):
        x = x.to(self.device)
        return self.module_(x, **fit_params)

    def run_validation(self, dataset_valid, **fit_params):
        for Xi, yi in self.get_iterator(dataset_valid, training=False):
            self.notify("on_batch_begin", X=Xi, y=yi, training=False)
            step = self.validation_step(Xi, yi, **fit_params)
            self.history.record_batch("valid_loss", step["loss"].item())
            self.notify("on_batch_end", X=Xi, y=yi, training=False, **step)
