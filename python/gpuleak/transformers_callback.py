"""An optional Hugging Face `TrainerCallback` that names evaluation and prediction as phases.

The Trainer needs no callback for gpuleak to find training steps: it steps a
torch.optim.Optimizer (through accelerate's AcceleratedOptimizer, which
calls the wrapped optimizer's step()), so torch's optimizer step hooks mark
them. This callback adds the evaluation loop: each prediction step of
`evaluate()` or `predict()` becomes an iteration (gpuleak.step()) of a phase
named "evaluation", so what evaluation keeps is judged apart from training:

    from gpuleak.transformers_callback import GpuleakTrainerCallback
    trainer = transformers.Trainer(..., callbacks=[GpuleakTrainerCallback()])

The Trainer has no "evaluation begins" event: the phase begins at the first
prediction step and ends at on_evaluate / on_predict. Every hook is a cheap
no-op outside `gpuleak run`, and none raises.
"""

import gpuleak
from gpuleak._notice import say_once


def _call(name, *args):
    """gpuleak.<name>(*args); a failure is said once and never reaches the training loop."""
    try:
        getattr(gpuleak, name)(*args)
    except Exception as error:
        say_once("callback-" + name, "gpuleak.%s() failed in the %s (%s)" % (name, __name__, error))


PHASE = "evaluation"


def make_callback_class(callback_base):
    """The callback class over transformers' TrainerCallback base class."""

    class GpuleakTrainerCallback(callback_base):
        def __init__(self):
            super().__init__()
            self._in_phase = False

        def on_prediction_step(self, args, state, control, **kwargs):
            if not self._in_phase:
                self._in_phase = True
                _call("begin_phase", PHASE)
            _call("step")

        def _end(self):
            if self._in_phase:
                self._in_phase = False
                _call("end_phase")

        def on_evaluate(self, args, state, control, **kwargs):
            self._end()

        def on_predict(self, args, state, control, **kwargs):
            self._end()

        def on_train_end(self, args, state, control, **kwargs):
            self._end()

    GpuleakTrainerCallback.__module__ = __name__
    GpuleakTrainerCallback.__qualname__ = "GpuleakTrainerCallback"
    return GpuleakTrainerCallback


def __getattr__(name):
    if name == "GpuleakTrainerCallback":
        from transformers import TrainerCallback

        cls = make_callback_class(TrainerCallback)
        globals()["GpuleakTrainerCallback"] = cls
        return cls
    raise AttributeError(name)
