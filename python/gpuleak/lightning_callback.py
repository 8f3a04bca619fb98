"""An optional Lightning callback that names Lightning's loops as gpuleak phases.

Lightning needs no callback for gpuleak to find training steps: its
LightningOptimizer calls the wrapped torch.optim.Optimizer's step(), which
runs torch's optimizer step hooks, and those mark gpuleak's steps. This
callback adds what the optimizer cannot say: which loop an iteration
belongs to. Validation, test, predict and the sanity check each become a
phase (gpuleak.begin_phase/end_phase), and each of their batches an
iteration (gpuleak.step()), so a leak in validation is judged on its own:

    from gpuleak.lightning_callback import GpuleakCallback
    trainer = lightning.Trainer(callbacks=[GpuleakCallback()])

Works with `lightning` and with the older `pytorch_lightning` package.
Every hook is a cheap no-op outside `gpuleak run`, and none raises.
"""

import gpuleak
from gpuleak._notice import say_once


def _call(name, *args):
    """gpuleak.<name>(*args); a failure is said once and never reaches the training loop."""
    try:
        getattr(gpuleak, name)(*args)
    except Exception as error:
        say_once("callback-" + name, "gpuleak.%s() failed in the %s (%s)" % (name, __name__, error))


# Lightning's loop names, as the phases they become.
PHASES = {"sanity_check": "sanity-check", "validation": "validation", "test": "test", "predict": "predict"}


def make_callback_class(callback_base):
    """The callback class over Lightning's Callback base class."""

    class GpuleakCallback(callback_base):
        def __init__(self):
            super().__init__()
            self._open = []

        def _begin(self, loop):
            self._open.append(loop)
            _call("begin_phase", PHASES[loop])

        def _end(self, loop):
            if self._open and self._open[-1] == loop:
                self._open.pop()
                _call("end_phase")

        # The sanity check runs validation batches inside its own phase.
        def on_sanity_check_start(self, trainer, pl_module):
            self._begin("sanity_check")

        def on_sanity_check_end(self, trainer, pl_module):
            self._end("sanity_check")

        def on_validation_start(self, trainer, pl_module):
            self._begin("validation")

        def on_validation_end(self, trainer, pl_module):
            self._end("validation")

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            _call("step")

        def on_test_start(self, trainer, pl_module):
            self._begin("test")

        def on_test_end(self, trainer, pl_module):
            self._end("test")

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            _call("step")

        def on_predict_start(self, trainer, pl_module):
            self._begin("predict")

        def on_predict_end(self, trainer, pl_module):
            self._end("predict")

        def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            _call("step")

        def on_exception(self, trainer, pl_module, exception):
            while self._open:
                self._end(self._open[-1])

    GpuleakCallback.__module__ = __name__
    GpuleakCallback.__qualname__ = "GpuleakCallback"
    return GpuleakCallback


def _lightning_callback_base():
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback  # the package's name before Lightning 2.0
    return Callback


def __getattr__(name):
    if name == "GpuleakCallback":
        cls = make_callback_class(_lightning_callback_base())
        globals()["GpuleakCallback"] = cls
        return cls
    raise AttributeError(name)
