"""Holder requests from `gpuleak run` (docs/python-protocol.md).

Every walk runs in a forked copy of the process (run_isolated), so nothing
that goes wrong in it can stop the training job, and the job goes on while
the copy walks (answer_in_background): it pauses only for the fork, not for
the walk's time budget (a 12-layer GPT-2 step lost 0.7-1.5 s, once per
process, while the parent waited).

At a step boundary: one `os.stat` of
<GPULEAK_TRACE_DIR>/gpuleak-<pid>.holder-request.json, at most every
GPULEAK_HOLDER_POLL_MS (100 ms; 0 = every step). A stat of a missing file
costs 2-4 us (the exception included), a time check 0.1 us, and nothing
needs the answer sooner. When the file exists the request is taken (renamed
first, so a request written meanwhile is not lost), deleted, answered by the
holder walk, and the answer written as one `holder` annotation.

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

import atexit
import ctypes
import json
import os
import select
import sys
import threading
import time
import warnings

from gpuleak._notice import say_once


def run_isolated(function, timeout_s):
    """Runs function() in a forked copy of this process and returns its JSON-able result.

    The holder walk reads the whole heap and autograd graphs through
    PyTorch's C++ accessors; whatever goes wrong there must not take the
    training job down. The child works on a copy-on-write snapshot, touches
    no CUDA (only Python objects and tensor metadata), sends its answer
    through a pipe and leaves with os._exit. Returns (result, None) or
    (None, why it failed). Never raises.
    """
    child, failure = _fork_isolated(function)
    if child is None:
        return None, failure
    return _collect_isolated(child, timeout_s)


def _fork_isolated(function):
    """Forks a copy that runs function() and writes its result as JSON to a pipe.
    Returns ((pid, read_end), None) or (None, why not)."""
    try:
        read_end, write_end = os.pipe()
    except OSError as error:
        return None, "cannot make a pipe (%s)" % error
    try:
        with warnings.catch_warnings():
            # fork() in a multi-threaded process warns (3.12); the child only
            # runs Python code that takes no lock another thread could hold.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        return None, "cannot fork (%s)" % error
    if pid == 0:  # the child
        status = 1
        try:
            os.close(read_end)
            data = json.dumps(function(), default=str).encode("utf-8")
            view = memoryview(data)
            while view:
                written = os.write(write_end, view)
                view = view[written:]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return (pid, read_end), None


def _collect_isolated(child, timeout_s):
    """Reads the forked copy's answer; kills it at timeout_s. (result, None) or (None, why)."""
    pid, read_end = child
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, 9)
                return None, "the holder walk took longer than %.1f s" % timeout_s
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        try:
            _, status = os.waitpid(pid, 0)
        except OSError:
            status = 0
    if status != 0:
        how = (
            ("killed by signal %d" % os.WTERMSIG(status))
            if os.WIFSIGNALED(status)
            else "exit status %d" % os.WEXITSTATUS(status)
        )
        return None, "the holder walk failed in its isolated copy (%s); the program is unaffected" % how
    try:
        return json.loads(b"".join(chunks).decode("utf-8")), None
    except ValueError as error:
        return None, "unreadable answer from the holder walk (%s)" % error


def _failed_answer(request, failure):
    return {
        "request_id": request.get("request_id") if isinstance(request, dict) else None,
        "seconds": 0.0,
        "sites": [],
        "error": failure,
    }


# Walks whose answers are still being read (threads of run_in_background).
_walks_in_flight = []
_walks_lock = threading.Lock()


def _forget_walks_in_child():
    # A forked child (a DataLoader worker, the walk's own copy) has none of
    # these threads, and the lock may have been held by one of them at fork.
    global _walks_lock
    _walks_lock = threading.Lock()
    del _walks_in_flight[:]


os.register_at_fork(after_in_child=_forget_walks_in_child)


def answer_in_background(request, seconds, deliver):
    """Starts the holder walk for `request` (run_in_background); deliver(answer) gets the
    holder annotation, or one that says why there is none."""
    from gpuleak import holders

    def done(answer, failure):
        deliver(answer if answer is not None else _failed_answer(request, failure))

    run_in_background(lambda: holders.answer_request(request, seconds), seconds + 3.0, done)


def run_in_background(function, timeout_s, deliver):
    """Forks a copy that runs function() now and returns; a thread reads the result and
    calls deliver(result, failure) as run_isolated would return them. The program waits
    only for the fork, not for the walk (up to its budget: 2 s by default, 30 s at most);
    the copy still sees the heap of this moment, so what it names is what held the memory
    here.

    The reader threads are not daemons: a program that ends meanwhile waits for them at
    exit (at most timeout_s), so its last walk still reaches the trace."""
    child, failure = _fork_isolated(function)
    if child is None:
        deliver(None, failure)
        return

    def read_result():
        try:
            deliver(*_collect_isolated(child, timeout_s))
        except Exception as error:
            say_once("holder-answer", "writing a holder answer failed (%s)" % error)
        finally:
            with _walks_lock:
                if reader in _walks_in_flight:
                    _walks_in_flight.remove(reader)

    reader = threading.Thread(target=read_result, name="gpuleak-holder-answer", daemon=False)
    try:
        reader.start()
    except RuntimeError:  # no thread can start (the interpreter is ending): read it here
        read_result()
        return
    with _walks_lock:
        if reader.is_alive():  # one that ended already is not waited for
            _walks_in_flight.append(reader)


def wait_for_walks(timeout_s=None):
    """Waits until every walk started so far has delivered its answer; True if all did."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        with _walks_lock:
            # Dead ones: a reader that ended as it was listed.
            _walks_in_flight[:] = [t for t in _walks_in_flight if t.is_alive()]
            pending = list(_walks_in_flight)
        if not pending:
            return True
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        pending[0].join(left)


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
            self._annotate(_failed_answer(request, "the request is not a JSON object"))
        else:
            answer_in_background(request, requested_seconds(request, self.seconds), self._annotate)

    def walk_at_exit(self):
        """At the program's exit, when no holder walk ran in it: one walk for the sites that
        grew at several steps, not in a row or not long enough to become candidates while it
        ran (a short job; a leak of every other step), so its report still names what holds
        them. Bounded by the walk's budget (GPULEAK_HOLDER_SECONDS, 2 s by default, plus 3 s
        for the copy to end); silent, and never changes the program's output or exit status."""
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
            self._annotate(answer if answer is not None else _failed_answer(request, failure))
            self.collector.flush()
        except Exception:
            pass  # the program has ended; its output and status are its own

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


def driver_allocations_are_arrays():
    """JAX with its platform allocator (and no CuPy, whose arrays share their pool blocks'
    addresses): its driver allocations and virtual-memory mappings hold its arrays."""
    if "jax" not in sys.modules or "cupy" in sys.modules:
        return False
    from gpuleak.jax_arrays import allocator_mode

    return allocator_mode(os.environ)[0] == "platform"


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
