"""Holder requests from `gpuleak run` (docs/python-protocol.md).

Every walk runs in a forked copy of the process (run_isolated), so nothing
that goes wrong in it can stop the training job.

At a step boundary: one `os.stat` of
<GPULEAK_TRACE_DIR>/gpuleak-<pid>.holder-request.json, at most every
GPULEAK_HOLDER_POLL_MS (100 ms; 0 = every step). A stat of a missing file
costs 2-4 us (the exception included), a time check 0.1 us, and nothing
needs the answer sooner. When the file exists the request is taken (renamed
first, so a request written meanwhile is not lost), deleted, answered by the
holder walk, and the answer written as one `holder` annotation.
"""

import json
import os
import select
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
        how = ("killed by signal %d" % os.WTERMSIG(status)) if os.WIFSIGNALED(status) \
            else "exit status %d" % os.WEXITSTATUS(status)
        return None, "the holder walk failed in its isolated copy (%s); the program is unaffected" % how
    try:
        return json.loads(b"".join(chunks).decode("utf-8")), None
    except ValueError as error:
        return None, "unreadable answer from the holder walk (%s)" % error


def answer_isolated(request, seconds):
    """The holder annotation for `request`, computed in a forked copy (run_isolated)."""
    from gpuleak import holders

    answer, failure = run_isolated(lambda: holders.answer_request(request, seconds), seconds + 3.0)
    if answer is None:
        answer = {"request_id": request.get("request_id") if isinstance(request, dict) else None,
                  "seconds": 0.0, "sites": [], "error": failure}
    return answer


class HolderRequests:
    def __init__(self, collector, trace_dir, seconds, poll_interval_s=0.1, clock=time.monotonic):
        self.collector = collector
        self.trace_dir = os.path.abspath(trace_dir)
        self.seconds = seconds
        self.poll_interval_s = poll_interval_s
        self.clock = clock
        self.next_poll = 0.0
        self.pid = None
        self.path = None

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
        self.in_process_requests = getattr(self, "in_process_requests", 0) + 1
        request = {"request_id": "in-process-%d" % self.in_process_requests,
                   "sites": [{"site_id": site_id, "addresses": pairs} for site_id, pairs in candidates]}
        self.collector.annotate("holder", json.dumps(answer_isolated(request, self.seconds), default=str))

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
        if not isinstance(request, dict):
            answer = {"request_id": None, "seconds": 0.0, "sites": [],
                      "error": "the request is not a JSON object"}
        else:
            answer = answer_isolated(request, self.seconds)
        self.collector.annotate("holder", json.dumps(answer, default=str))
