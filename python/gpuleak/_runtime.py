"""The package's state in this process: one collector handle, one step clock."""

import os

from gpuleak import _collector

_clock = None


def clock():
    """The process's StepClock (created on first use; a no-op one without a collector)."""
    global _clock
    if _clock is None:
        from gpuleak._steps import StepClock

        collector = _collector.load()
        made = StepClock(collector)
        if collector is not None and os.environ.get("GPULEAK_HOLDER_REQUESTS") == "1":
            from gpuleak._holder_requests import HolderRequests

            made.holder_requests = HolderRequests(
                collector,
                os.environ.get("GPULEAK_TRACE_DIR") or "gpuleak-traces",
                seconds=_number_from_environment("GPULEAK_HOLDER_SECONDS", 2.0),
                poll_interval_s=_number_from_environment("GPULEAK_HOLDER_POLL_MS", 100.0) / 1000,
            )
            _start_request_watcher(made.holder_requests)
        _clock = made
    return _clock


def _number_from_environment(name, default):
    try:
        return max(0.0, float(os.environ[name]))
    except (KeyError, ValueError):
        return default


def _start_request_watcher(requests):
    """The thread that answers holder requests in loops without in-process steps. Never raises."""
    try:
        from gpuleak._request_watcher import RequestWatcher

        watcher = RequestWatcher(requests, idle_s=_number_from_environment("GPULEAK_HOLDER_IDLE_MS", 1000.0) / 1000)
        watcher.start()
        requests.watcher = watcher
    except Exception as error:
        from gpuleak._notice import say_once

        say_once(
            "holder-watcher",
            "cannot start the holder-request watcher (%s); requests are " "answered at step boundaries only" % error,
        )
