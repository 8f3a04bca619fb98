"""Holder requests from `gpuleak run` (docs/python-protocol.md).

At each step boundary: one `os.stat` of
<GPULEAK_TRACE_DIR>/gpuleak-<pid>.holder-request.json. When it exists the
request is taken (renamed first, so a request written meanwhile is not lost),
deleted, answered by the holder walk, and the answer written as one `holder`
annotation.
"""

import json
import os

from gpuleak._notice import say_once


class HolderRequests:
    def __init__(self, collector, trace_dir, seconds):
        self.collector = collector
        self.trace_dir = os.path.abspath(trace_dir)
        self.seconds = seconds
        self.pid = None
        self.path = None

    def request_path(self):
        pid = os.getpid()
        if pid != self.pid:  # a forked child answers for itself
            self.pid = pid
            self.path = os.path.join(self.trace_dir, "gpuleak-%d.holder-request.json" % pid)
        return self.path

    def on_step(self):
        path = self.request_path()
        try:
            os.stat(path)
        except OSError:
            return
        self.answer(path)

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
