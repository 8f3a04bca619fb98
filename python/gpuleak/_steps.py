"""Step boundaries: when a training step ended, and what happens then.

A step ends when an optimizer finishes `step()` (torch's global optimizer
step hooks) or when the program calls `gpuleak.step()`. At each boundary the
clock marks the step in the trace, takes memory samples (rate-limited, see
_memory_samples.py) and looks for a holder request (one stat call).

Which optimizer steps count, so a step is one training iteration:
  * steps are counted on one optimizer, the pacer: the first that stepped.
    A GAN's second optimizer, stepping once per iteration too, adds nothing;
  * another optimizer becomes the pacer when it completes two steps while
    the pacer completes none (the first one was a warm-up or an LR finder, or
    was dropped); the pacer is held by a weak reference;
  * a step() nested inside another optimizer's step() (Lookahead-style
    wrappers) does not count separately; torch >= 2.0 only, where the
    pre-hook shows which step is outermost;
  * once the program calls gpuleak.step(), explicit steps win: optimizer
    steps are no longer marked.

Everything here runs inside the program's training loop: it is cheap, takes
no lock, and never raises into the caller (a failing part turns itself off
and says so once on stderr).
"""

import weakref

from gpuleak import _collector
from gpuleak._notice import say_once


class StepClock:
    def __init__(self, collector):
        self.collector = collector
        self._mark = collector.mark_step if collector is not None else None
        self.step = 0
        self.explicit = False
        self.sampler = None          # set once CUDA is initialized
        self.holder_requests = None  # set when GPULEAK_HOLDER_REQUESTS=1
        self._pacer = None           # weakref (or a callable returning it) to the pacer
        self._others = {}            # id(optimizer) -> steps since the pacer last stepped
        self._outermost = None       # id of the optimizer whose step() began first
        self._nested_steps = 0

    # ---- torch optimizer hooks (signature: optimizer, args, kwargs) ---------

    def on_optimizer_step_started(self, optimizer, args, kwargs):
        if self._outermost is None:
            self._outermost = id(optimizer)
            self._nested_steps = 0
        return None

    def on_optimizer_step_finished(self, optimizer, args=None, kwargs=None):
        try:
            if self.explicit:
                self._outermost = None
                return
            key = id(optimizer)
            if self._outermost is not None and key != self._outermost:
                # Nested in another optimizer's step(), or that step raised
                # and never finished: a second such step means the latter.
                self._nested_steps += 1
                if self._nested_steps < 2:
                    return
            self._outermost = None
            if self._is_pacer(optimizer, key):
                self.boundary(_collector.STEP_FROM_OPTIMIZER_HOOK)
        except Exception as error:
            say_once("optimizer-hook", "the optimizer step hook failed (%s); "
                     "steps are not marked from optimizers any more" % error)
            self.explicit = True

    def _is_pacer(self, optimizer, key):
        pacer = self._pacer() if self._pacer is not None else None
        if pacer is optimizer:
            if self._others:
                self._others.clear()
            return True
        steps = self._others.get(key, 0) + 1
        if pacer is None or steps >= 2:
            self._adopt(optimizer)
            return True
        self._others[key] = steps
        return False

    def _adopt(self, optimizer):
        try:
            self._pacer = weakref.ref(optimizer)
        except TypeError:  # an optimizer type without __weakref__
            self._pacer = lambda: optimizer
        self._others.clear()

    # ---- gpuleak.step() -------------------------------------------------------

    def explicit_step(self):
        self.explicit = True
        self.boundary(_collector.STEP_FROM_EXPLICIT_CALL)

    # ---- the boundary ---------------------------------------------------------

    def boundary(self, source):
        if self._mark is None:
            return
        self.step += 1
        self._mark(self.step, source)
        sampler = self.sampler
        if sampler is not None:
            try:
                sampler.on_step()
            except Exception as error:
                say_once("sampler", "memory sampling failed (%s); it is off from now on" % error)
                self.sampler = None
        requests = self.holder_requests
        if requests is not None:
            try:
                requests.on_step()
            except Exception as error:
                say_once("holder-requests", "answering holder requests failed (%s); "
                         "it is off from now on" % error)
                self.holder_requests = None
