"""Holder requests from `gpuleak run` (docs/python-protocol.md).

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
import time

from gpuleak._notice import say_once


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
        candidates = self.collector.take_growth_candidates()
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
        from gpuleak import holders

        self.in_process_requests = getattr(self, "in_process_requests", 0) + 1
        request = {"request_id": "in-process-%d" % self.in_process_requests,
                   "sites": [{"site_id": site_id, "addresses": pairs} for site_id, pairs in candidates]}
        answer = holders.answer_request(request, self.seconds)
        self.collector.annotate("holder", json.dumps(answer, default=str))

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
            from gpuleak import holders
            answer = holders.answer_request(request, self.seconds)
        self.collector.annotate("holder", json.dumps(answer, default=str))
