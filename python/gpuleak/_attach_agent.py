"""What runs inside a Python process that `gpuleak attach PID` joined (docs/attach.md).

gpuleak's injector (src/attach/) queues a short boot string on the
interpreter's pending calls; the interpreter runs it on its main thread at
its next bytecode boundary, with the GIL held, and the boot calls start().
From there everything is what `gpuleak.track()` and `gpuleak run` already
do in a Python process (tracking.py's one recorder, _boot.py's set-up):
the collector is loaded with ctypes (here, at a safe point, never from the
stopped thread), PyTorch's allocator hook is attached once CUDA is up,
optimizer and DataLoader steps are marked, CuPy and JAX are followed.

A watcher thread ends the recording when the first of these comes:
  * the bound: `duration_s` seconds or `steps` steps since the start;
  * `gpuleak attach` asks (the file `stop` in the control folder: Ctrl-C,
    or the CLI's own bound);
  * `gpuleak attach` is gone (killed): the process must not record for ever.
The bound holds even when gpuleak is alive but no longer asks (stopped, hung).
It then writes the last records, closes the trace (gpuleak_stop_recording)
and turns off the parts that would keep costing time: the holder-request
watcher and the memory sampler. The allocator hook and the step hooks stay
installed (torch has no way to remove a trace tracker) but record nothing.

The control folder holds the handshake, one JSON file each: `started.json`
(or `failed.json` with the reason) when recording starts, `stopped.json`
when the trace is closed. Nothing here ever raises into the program.
"""

import json
import os
import threading
import time

# How often the watcher looks at the bound and the control folder.
WATCH_INTERVAL_S = 0.05
# Holder walks still running when the bound comes are waited for this long.
HOLDER_WALK_WAIT_S = 10.0

_session = None  # the one attach session of this process


def start(settings):
    """Starts recording as `settings` say (written by src/cli/attach_command.cpp). Never raises."""
    control = settings.get("control_dir") or ""
    try:
        why_not = _refusal(settings)
        if why_not:
            _write(control, "failed.json", {"reason": why_not})
            return
        global _session
        _session = _Session(settings)
        _session.begin()
    except BaseException as error:  # the program must go on whatever happened here
        _write(control, "failed.json", {"reason": "%s: %s" % (type(error).__name__, error)})


def _refusal(settings):
    if time.time() > float(settings.get("start_deadline_unix_s") or 0):
        return "the boot ran after gpuleak attach had given up waiting for it"
    if not _gpuleak_alive(settings):
        return "gpuleak attach ended before the boot ran"
    if os.path.exists(os.path.join(settings["control_dir"], "stop")):
        return "gpuleak attach asked to stop before the boot ran"
    if _session is not None:
        return (
            "this process was attached to before (PID %d records into one trace in its life; "
            "restart it under `gpuleak run` to record it again)" % os.getpid()
        )
    from gpuleak import _collector

    if _collector.loaded_in_process() and _collector.load().is_recording():
        return (
            "this process is already recorded by gpuleak (`gpuleak run` or `gpuleak.track()`; "
            "its trace is in %s)" % (os.environ.get("GPULEAK_TRACE_DIR") or "?")
        )
    return None


def _gpuleak_alive(settings):
    """Whether the `gpuleak attach` process that started us still runs (the same process: its
    start time in /proc is compared, so a reused PID does not count)."""
    pid = int(settings.get("cli_pid") or 0)
    if pid <= 0:
        return True
    try:
        with open("/proc/%d/stat" % pid, "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) == int(settings.get("cli_start_ticks") or 0)
    except (OSError, IndexError, ValueError):
        return False


def _write(control, name, value):
    """Writes one handshake file whole (a rename), so the CLI never reads half of it."""
    if not control:
        return
    try:
        partial = os.path.join(control, name + ".partial")
        with open(partial, "w") as out:
            json.dump(value, out)
        os.replace(partial, os.path.join(control, name))
    except OSError:
        pass


class _Session:
    def __init__(self, settings):
        self.settings = settings
        self.control = settings["control_dir"]
        self.duration_s = float(settings.get("duration_s") or 0)
        self.steps = int(settings.get("steps") or 0)
        self.collector = None
        self.clock = None
        self.first_step = 0
        self.started_at = 0.0

    def begin(self):
        # What the collector and the package read when they start: as
        # `gpuleak run` sets them, before anything loads.
        os.environ["GPULEAK_BINARY"] = self.settings["cli"]
        os.environ["GPULEAK_COLLECTOR"] = self.settings["collector"]
        os.environ["GPULEAK_HOLDER_REQUESTS"] = "1"
        from gpuleak import _boot, _runtime, tracking

        why_not = tracking._process.ensure_started(self.settings["trace_dir"])
        if why_not:
            _write(self.control, "failed.json", {"reason": why_not})
            return
        self.collector = tracking._process.collector
        self.collector.annotate(
            "attach",
            json.dumps({"event": "begin", "cli_pid": int(self.settings.get("cli_pid") or 0), "baseline": _baseline()}),
        )
        driver = _start_driver_capture(self.collector)
        _boot.install_python_loop()
        self.clock = _runtime.clock()
        self.first_step = self.clock.step
        self.started_at = time.monotonic()
        _write(
            self.control,
            "started.json",
            {
                "pid": os.getpid(),
                "trace": tracking._process.trace_path(),
                "driver_calls": driver,
                "torch": _torch_state(),
            },
        )
        watcher = threading.Thread(target=self.watch, name="gpuleak-attach", daemon=True)
        watcher.start()

    def watch(self):
        reason = None
        while reason is None:
            time.sleep(WATCH_INTERVAL_S)
            elapsed = time.monotonic() - self.started_at
            if os.path.exists(os.path.join(self.control, "stop")):
                reason = "asked"
            elif not _gpuleak_alive(self.settings):
                reason = "gpuleak attach ended"
            elif self.duration_s and elapsed >= self.duration_s:
                reason = "duration"  # also when gpuleak is alive but no longer asks
            elif self.steps and self.clock.step - self.first_step >= self.steps:
                reason = "steps"
        self.end(reason)

    def end(self, reason):
        try:
            from gpuleak import _forked_walk

            _forked_walk.wait_for_walks(HOLDER_WALK_WAIT_S)
        except Exception:
            pass
        steps = self.clock.step - self.first_step
        try:
            self.collector.annotate(
                "attach",
                json.dumps(
                    {
                        "event": "end",
                        "reason": reason,
                        "steps": steps,
                        "seconds": round(time.monotonic() - self.started_at, 3),
                    }
                ),
            )
            self.collector.flush()
        except Exception:
            pass
        _stop_recording(self.collector)
        self._quiet_the_package()
        _write(self.control, "stopped.json", {"reason": reason, "steps": steps})

    def _quiet_the_package(self):
        """What would keep costing time after the detach: off."""
        clock = self.clock
        requests = getattr(clock, "holder_requests", None)
        watcher = getattr(requests, "watcher", None)
        try:
            if watcher is not None:
                watcher.stopped.set()
        except Exception:
            pass
        clock.holder_requests = None
        clock.sampler = None


def _stop_recording(collector):
    try:
        stop = getattr(collector.library, "gpuleak_stop_recording", None)
        if stop is not None:
            stop.argtypes, stop.restype = [], None
            stop()
        else:  # an older collector: flushed, still open
            collector.flush()
    except Exception:
        pass


def _baseline():
    """What the process held before the attach: no stacks for it, only its size."""
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return {
                "torch_allocated_bytes": int(torch.cuda.memory_allocated()),
                "torch_reserved_bytes": int(torch.cuda.memory_reserved()),
            }
    except Exception:
        pass
    return {}


def _torch_state():
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        cuda = bool(torch.cuda.is_initialized())
    except Exception:
        cuda = False
    return {"version": str(getattr(torch, "__version__", "?")), "cuda_initialized": cuda}


def _start_driver_capture(collector):
    """Driver allocation calls from now on, where the process uses the CUDA driver already: the
    collector's CUPTI subscription starts late (an interposer cannot: it must be preloaded).
    Returns whether it was asked to."""
    try:
        with open("/proc/self/maps") as maps:
            if "libcuda.so" not in maps.read():
                return False
        import ctypes

        collector.library.InitializeInjection.restype = ctypes.c_int
        collector.library.InitializeInjection()
        return True
    except Exception:
        return False
