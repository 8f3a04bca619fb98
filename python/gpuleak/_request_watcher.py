"""Answers holder requests in loops with no step boundary in the process.

Loops with no boundary inside the process (their iterations are found in
the trace, from the period of the allocation stream) would never answer:
a watcher thread (RequestWatcher) looks for the request file whenever no
in-process step came for GPULEAK_HOLDER_IDLE_MS (1 s) and has the main
thread answer it through Python's pending-call queue (Py_AddPendingCall),
at its next bytecode boundary. The walk must run on the main thread: the
forked copy keeps only the thread that forked, and the loop's locals (the
usual holders) live on the main thread's stack.

A CuPy or JAX loop that marks no step may also end before `gpuleak run`'s
request can come (a 200-iteration loop can take a second). In a process
without torch that never marked a step, the watcher therefore also marks a
step boundary of the collector's live index every GROWTH_BOUNDARY_S
(gpuleak_mark_growth_boundary, no step): a site whose live arrays rose at 8
of these boundaries in a row becomes a candidate, and
the main thread walks for its holder at once, as a step boundary does with
the candidates of a torch loop.
"""


import ctypes
import os
import sys
import threading
import time

from gpuleak._holder_requests import driver_allocations_are_arrays
from gpuleak._notice import say_once


# Py_AddPendingCall's callback type: int (*)(void *); it runs on the main
# thread with the GIL held and must return 0 (-1 would raise there).
_PENDING_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


# How long the watcher waits in a process that never marked a step.
NO_STEPS_IDLE_S = 0.2

# Between the growth boundaries of a process without steps or torch: 8 in a
# row (0.4 s) make a candidate.
GROWTH_BOUNDARY_S = 0.05


def marks_growth_boundaries(requests):
    """Whether growth boundaries without steps serve this process: no in-process step so far, no torch (whose
    allocations are judged at its own boundaries), and a collector that has them."""
    return (
        not requests.stepped
        and "torch" not in sys.modules
        and getattr(requests.collector, "mark_growth_boundary", None) is not None
    )


class RequestWatcher(threading.Thread):
    """Answers holder requests while the program marks no steps in the process.

    Every poll interval, when the last in-process step (requests.last_step)
    is older than idle_s and the request file exists, one pending call is
    queued; the main thread runs it at its next bytecode boundary (after a
    long operator returns, if it is in one) and answers the request there,
    as a step boundary would. A step boundary that comes first answers it
    instead (the file is taken by a rename; only one of them finds it).
    Costs one stat of a missing file per interval while the loop is idle.
    """

    def __init__(self, requests, idle_s=1.0, clock=time.monotonic):
        super().__init__(name="gpuleak-holder-requests", daemon=True)
        self.requests, self.idle_s, self.clock = requests, idle_s, clock
        self.interval_s = max(0.05, requests.poll_interval_s)
        self.queued = threading.Event()
        self.stopped = threading.Event()
        self.answered = 0
        self.candidates = []  # growth candidates the main thread has still to walk for
        self.candidates_lock = threading.Lock()
        self.marking_boundaries = True
        # Kept referenced for as long as a call may be pending.
        self.callback = _PENDING_CALL(self.on_main_thread)
        try:
            self.add_pending_call = ctypes.pythonapi.Py_AddPendingCall
            self.add_pending_call.argtypes = [_PENDING_CALL, ctypes.c_void_p]
            self.add_pending_call.restype = ctypes.c_int
        except (AttributeError, OSError):
            self.add_pending_call = None

    def run(self):
        next_poll = 0.0
        while not self.stopped.wait(GROWTH_BOUNDARY_S if self.marking_boundaries else self.interval_s):
            try:
                found = self.mark_growth_boundary() if self.marking_boundaries else False
                now = self.clock()
                if not found and now < next_poll:
                    continue
                next_poll = now + self.interval_s
                # A program that never marked a step in the process (a CuPy or
                # JAX loop) is answered sooner: short runs end before a second.
                idle_s = self.idle_s if self.requests.stepped else min(self.idle_s, NO_STEPS_IDLE_S)
                if self.queued.is_set() or now - self.requests.last_step < idle_s:
                    continue
                if not found and not os.path.exists(self.requests.request_path()):
                    continue
                if self.add_pending_call is None:
                    say_once(
                        "holder-watcher",
                        "this Python cannot queue calls to its main thread; "
                        "holder requests are answered at step boundaries only",
                    )
                    return
                self.queued.set()
                if self.add_pending_call(self.callback, None) != 0:
                    self.queued.clear()  # the queue was full: try again next interval
            except Exception as error:
                say_once(
                    "holder-watcher",
                    "watching for holder requests failed (%s); they are " "answered at step boundaries only" % error,
                )
                return

    def mark_growth_boundary(self):
        """One growth boundary while the process qualifies (marks_growth_boundaries); whether
        candidates wait."""
        if not marks_growth_boundaries(self.requests):
            # Steps came (or torch arrived): their boundaries judge growth from now on.
            self.marking_boundaries = not self.requests.stepped
            return False
        self.requests.collector.mark_growth_boundary(driver_allocations_are_arrays())
        found = self.requests.collector.take_growth_candidates()
        if found:
            with self.candidates_lock:
                self.candidates.extend(found)
        with self.candidates_lock:
            return bool(self.candidates)

    def on_main_thread(self, _argument):
        try:
            with self.candidates_lock:
                candidates, self.candidates = self.candidates, []
            if candidates:
                self.requests.answer_candidates(candidates)
            path = self.requests.request_path()
            if os.path.exists(path):
                self.requests.answer(path)
                self.answered += 1
        except Exception as error:
            say_once("holder-watcher", "answering a holder request between steps failed (%s)" % error)
        finally:
            self.queued.clear()
        return 0
