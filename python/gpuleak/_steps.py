"""Step boundaries: when a training step ended, and what happens then.

The program's clocks, each marking a step once per pass of some loop:
`gpuleak.step()` calls, optimizer steps (torch's global optimizer step
hooks), DataLoader batches (one clock per dataset) and the main script's
loop (python_loop.py, one clock per loop it chose). Every step is marked
in the trace with its source and clock; the analysis decides which clock's
steps count in each part of the run (src/analysis/steps/
clock_arbiter.h), and finds loops without any of them in the allocations.

In the process, a step *paces* unless a more trusted clock (explicit >
optimizer > DataLoader > Python loop) marked one since this clock's last
step: only pacing steps take memory samples (rate-limited, see _memory_samples.py;
a framework pool's bytes in use, see jax_arrays.py), look for a holder
request (one stat call) and advance the collector's growth index, so a
DataLoader beside an optimizer does not double them.

Which optimizer steps count, so a step is one pass of the training loop:
  * steps are counted on one optimizer, the pacer: the first that stepped.
    A GAN's second optimizer, also stepping once per training step, adds nothing;
  * another optimizer becomes the pacer when it completes two steps while
    the pacer completes none (the first one was a warm-up or an LR finder, or
    was dropped); the pacer is held by a weak reference;
  * a step() nested inside another optimizer's step() (Lookahead-style
    wrappers) does not count separately; torch >= 2.0 only, where the
    pre-hook shows which step is outermost;
  * gpuleak.step() does not turn optimizer steps off: both are marked, and
    where both mark steps, explicit steps pace (a call once per epoch leaves the
    optimizer's steps pacing between).

Everything here runs inside the program's training loop: it is cheap, takes
no lock, and never raises into the caller (a failing part turns itself off
and says so once on stderr).
"""

import weakref

from gpuleak import _collector
from gpuleak._notice import say_once


# In-process trust of the sources (0 most trusted), as in clock_arbiter.h.
_RANK = {
    _collector.STEP_FROM_EXPLICIT: 0,
    _collector.STEP_FROM_OPTIMIZER_HOOK: 1,
    _collector.STEP_FROM_DATALOADER: 2,
    _collector.STEP_FROM_PYTHON_LOOP: 3,
}


class StepClock:
    def __init__(self, collector):
        self.collector = collector
        self._mark = collector.mark_clock_step if collector is not None else None
        self.step = 0  # pacing steps so far
        self._counts = {}  # (source, clock) -> steps so far
        self._last_mark = {}  # (source, clock) -> the order of its latest step among all clocks'
        self._order = 0
        self._optimizer_off = False  # its hook failed once
        self.sampler = None  # set once CUDA is initialized
        self.pool_reader = None  # a framework pool's bytes in use (jax_arrays.py)
        self.holder_requests = None  # set when GPULEAK_HOLDER_REQUESTS=1
        self._pacer = None  # weakref (or a callable returning it) to the pacer
        self._others = {}  # id(optimizer) -> steps since the pacer last stepped
        self._outermost = None  # id of the optimizer whose step() began first
        self._nested_steps = 0

    # ---- torch optimizer hooks (signature: optimizer, args, kwargs) ---------

    def on_optimizer_step_started(self, optimizer, args, kwargs):
        if self._outermost is None:
            self._outermost = id(optimizer)
            self._nested_steps = 0
        return None

    def on_optimizer_step_finished(self, optimizer, args=None, kwargs=None):
        try:
            if self._optimizer_off:
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
            say_once(
                "optimizer-hook",
                "the optimizer step hook failed (%s); " "steps are not marked from optimizers any more" % error,
            )
            self._optimizer_off = True

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
        self.boundary(_collector.STEP_FROM_EXPLICIT)

    # ---- DataLoader batches ---------------------------------------------------

    def dataloader_batch(self, clock):
        self.boundary(_collector.STEP_FROM_DATALOADER, clock)

    # ---- the main script's loop (python_loop.py) -----------------------------

    def python_loop_pass(self, clock):
        self.boundary(_collector.STEP_FROM_PYTHON_LOOP, clock)

    # ---- the boundary ---------------------------------------------------------

    def boundary(self, source, clock=0):
        if self._mark is None:
            return
        key = (source, clock)
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        self._order += 1
        previous = self._last_mark.get(key, 0)
        rank = _RANK.get(source, 4)
        pacing = True
        for (other_source, _), order in self._last_mark.items():
            if _RANK.get(other_source, 4) < rank and order > previous:
                pacing = False
                break
        self._last_mark[key] = self._order
        if pacing:
            # The pool is read before the mark, so the boundary sees its level
            # at this step's end (a loop of 0.5 ms steps would
            # otherwise have none: the sampler thread reads every 500 ms).
            self._run_part(
                "pool_reader", "pool-reader", "reading the framework's pool at steps failed (%s); it is off from now on"
            )
        self._mark(count, source, clock, 1 if pacing else 0)
        if not pacing:
            return
        self.step += 1
        self._run_part("sampler", "sampler", "memory sampling failed (%s); it is off from now on")
        self._run_part(
            "holder_requests", "holder-requests", "answering holder requests failed (%s); it is off from now on"
        )

    def _run_part(self, attribute, notice, message):
        """Calls on_step() of the part held in `attribute`, if any; a part that
        raises says so once and is dropped, so the loop runs on without it."""
        part = getattr(self, attribute)
        if part is None:
            return
        try:
            part.on_step()
        except Exception as error:
            say_once(notice, message % error)
            setattr(self, attribute, None)
