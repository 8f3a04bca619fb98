"""Holder requests from `gpuleak run` (docs/python-protocol.md).

At a step boundary: one `os.stat` of
<GPULEAK_TRACE_DIR>/gpuleak-<pid>.holder-request.json, at most every
GPULEAK_HOLDER_POLL_MS (100 ms; 0 = every step). A stat of a missing file
costs 2-4 us (the exception included), a time check 0.1 us, and nothing
needs the answer sooner. When the file exists the request is taken (renamed
first, so a request written meanwhile is not lost), deleted, answered by the
holder walk, and the answer written as one `holder` annotation.

Each walk runs in a forked copy of the process (_forked_walk.py); loops with
no step boundary inside the process are answered by a watcher thread
(_request_watcher.py).
"""

import atexit
import gc
import json
import os
import sys
import time

from gpuleak._forked_walk import run_in_background, run_isolated
from gpuleak._notice import say_once


def failed_answer(request, failure):
    """The holder annotation that says why `request` has no answer."""
    return {
        "request_id": request.get("request_id") if isinstance(request, dict) else None,
        "seconds": 0.0,
        "sites": [],
        "error": failure,
    }


def answer_in_background(request, seconds, deliver):
    """Starts the holder walk for `request` (run_in_background); deliver(answer) gets the
    holder annotation, or one that says why there is none."""
    from gpuleak import holders

    def done(answer, failure):
        deliver(answer if answer is not None else failed_answer(request, failure))

    run_in_background(lambda: holders.answer_request(request, seconds), seconds + 3.0, done)


class HolderRequests:
    def __init__(self, collector, trace_dir, seconds, poll_interval_s=0.1, clock=time.monotonic):
        self.collector = collector
        self.last_step = clock()
        self.stepped = False  # an in-process step came at least once
        self.trace_dir = os.path.abspath(trace_dir)
        self.seconds = seconds
        self.poll_interval_s = poll_interval_s
        self.clock = clock
        self.next_poll = 0.0
        self.pid = None
        self.path = None
        self.walks = 0  # walks started in this process (candidates and requests)
        self.exit_pid = os.getpid()
        atexit.register(self.walk_at_exit)

    def request_path(self):
        pid = os.getpid()
        if pid != self.pid:  # a forked child answers for itself
            self.pid = pid
            self.path = os.path.join(self.trace_dir, "gpuleak-%d.holder-request.json" % pid)
        return self.path

    def on_step(self):
        # Sites the collector saw growing at 8 consecutive steps: answered now,
        # in the process, so short jobs get their holders too (a request from
        # gpuleak run can only come after the trace reached it).
        self.last_step = self.clock()
        if (
            not self.stepped
            and driver_allocations_are_arrays()
            and getattr(self.collector, "mark_growth_boundary", None) is not None
        ):
            # The first step of a JAX loop with the platform allocator (the
            # main script's loop, python_loop.py) ends the watcher's growth
            # boundaries: its driver allocations, which are its arrays, must stay
            # in the live index the steps judge from now on.
            self.collector.mark_growth_boundary(True)
        self.stepped = True
        take = getattr(self.collector, "take_growth_candidates", None)
        candidates = take() if take is not None else []
        if candidates:
            self.answer_candidates(candidates)
        now = self.clock()
        if now < self.next_poll:
            return
        self.next_poll = now + self.poll_interval_s
        path = self.request_path()
        try:
            os.stat(path)
        except OSError:
            return
        self.answer(path)

    def answer_candidates(self, candidates):
        self.walks += 1
        self.in_process_requests = getattr(self, "in_process_requests", 0) + 1
        request = {
            "request_id": "in-process-%d" % self.in_process_requests,
            "sites": [{"site_id": site_id, "addresses": pairs} for site_id, pairs in candidates],
        }
        answer_in_background(request, self.seconds, self._annotate)

    def answer(self, path):
        taken = path + ".taken"
        try:
            os.replace(path, taken)
        except OSError:
            return  # gone meanwhile
        try:
            with open(taken, "rb") as request_file:
                request = json.loads(request_file.read().decode("utf-8"))
        except Exception as error:
            say_once("holder-request-parse", "unreadable holder request %s (%s)" % (path, error))
            request = None
        finally:
            try:
                os.unlink(taken)
            except OSError:
                pass
        self.walks += 1
        if not isinstance(request, dict):
            self._annotate(failed_answer(request, "the request is not a JSON object"))
        else:
            answer_in_background(request, requested_seconds(request, self.seconds), self._annotate)

    def walk_at_exit(self):
        """At the program's exit, when no holder walk ran in it: one walk for the sites that
        grew at several steps, not in a row or not long enough to become candidates while it
        ran (a short job; a leak of every other step), so its report still names what holds
        them. Bounded by the walk's budget (GPULEAK_HOLDER_SECONDS, 2 s by default, plus 3 s
        for the copy to end); silent, and never changes the program's output or exit status."""
        # No collection until the copy is forked: one set off by the walk's
        # imports would free what the candidates are when only a cycle keeps
        # it (exceptions kept with their tracebacks after the function that
        # kept them returned), and the walk would find nothing at their
        # addresses. Which allocation sets a collection off moves with every
        # module the package imports.
        collecting = gc.isenabled()
        gc.disable()
        try:
            if os.getpid() != self.exit_pid or self.walks:
                return  # a forked child (not its parent's job), or a walk ran already
            tracking = sys.modules.get("gpuleak.tracking")
            if tracking is not None and tracking._process.next_block > 1:
                return  # tracked blocks walked for their own reports, which are read
            at_exit = getattr(self.collector, "growth_candidates_at_exit", None)
            if at_exit is None or not self.collector.is_recording() or not at_exit():
                return
            candidates = self.collector.take_growth_candidates()
            if not candidates:
                return
            self.walks += 1
            request = {
                "request_id": "at-exit",
                "sites": [{"site_id": site_id, "addresses": pairs} for site_id, pairs in candidates],
            }
            from gpuleak import holders

            seconds = min(self.seconds, MAX_REQUESTED_SECONDS)
            answer, failure = run_isolated(lambda: holders.answer_request(request, seconds), seconds + 3.0)
            self._annotate(answer if answer is not None else failed_answer(request, failure))
            self.collector.flush()
        except Exception:
            pass  # the program has ended; its output and status are its own
        finally:
            if collecting:
                gc.enable()

    def _annotate(self, answer):
        self.collector.annotate("holder", json.dumps(answer, default=str))


# The most time a request may ask one walk for (a program that ends meanwhile waits for it).
MAX_REQUESTED_SECONDS = 30.0


def requested_seconds(request, default):
    """The walk's time budget: the request's `seconds` when it asks for more than the default
    (gpuleak run asks again with more after a walk that ran out of time), at most
    MAX_REQUESTED_SECONDS; anything else in that field is ignored."""
    value = request.get("seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return default
    return max(default, min(float(value), MAX_REQUESTED_SECONDS))


def driver_allocations_are_arrays():
    """JAX with its platform allocator (and no CuPy, whose arrays share their pool blocks'
    addresses): its driver allocations and virtual-memory mappings hold its arrays."""
    if "jax" not in sys.modules or "cupy" in sys.modules:
        return False
    from gpuleak.jax_arrays import allocator_mode

    return allocator_mode(os.environ)[0] == "platform"
