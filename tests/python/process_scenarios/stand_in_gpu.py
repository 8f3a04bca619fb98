"""A process's GPU use played through the collector and the stand-in CUPTI and NVML (no GPU needed).

`use_gpu()` in a process starts the collector as the CUDA driver would
(InitializeInjection: it subscribes to the stand-in CUPTI that
GPULEAK_CUPTI_LIBRARY names), retains a primary context and allocates through
the stand-in's driver entry points, so the trace holds a context record, the
`first_cuda_use` annotation with the caller's Python stack, and an allocation.
It then adds this pid to the stand-in NVML's state file
(GPULEAK_STAND_IN_NVML_STATE) with CONTEXT_BYTES more than it allocated, as the
driver would count the process; `leave()` takes it out again (a process that
exits releases its context) and ends the process without running the
collector's exit handler (see tests/python/conftest.py).

`start_collector_only()` is the helper that initializes CUDA and does no GPU
work (a cuInit without a context, like Open MPI's orted).
"""
import atexit
import ctypes
import fcntl
import os
import sys

CONTEXT_BYTES = 300 << 20
_state = {"collector": None, "cupti": None, "bytes": 0}


def collector():
    if _state["collector"] is None:
        library = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
        library.InitializeInjection()
        _state["collector"] = library
        atexit.register(leave)  # runs last: registered before anything the program adds
    return _state["collector"]


def start_collector_only():
    return collector()


def _edit_nvml_state(pid, held_bytes):
    path = os.environ.get("GPULEAK_STAND_IN_NVML_STATE")
    if not path:
        return
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as handle:
            lines = [line for line in handle if line.split()[:3] != ["process", "0", str(pid)]]
        if held_bytes:
            lines.append("process 0 %d %d\n" % (pid, held_bytes))
        with open(path + ".new.%d" % pid, "w") as handle:
            handle.writelines(lines)
        os.rename(path + ".new.%d" % pid, path)


def use_gpu(allocation_bytes=2 << 20):
    """Creates this process's context (once) and allocates `allocation_bytes` on the stand-in GPU."""
    library = collector()
    if _state["cupti"] is None:
        _state["cupti"] = ctypes.PyDLL(os.environ["GPULEAK_CUPTI_LIBRARY"])
        context = ctypes.c_void_p()
        assert _state["cupti"].stand_in_cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
    address = ctypes.c_uint64()
    assert _state["cupti"].stand_in_cuMemAlloc(ctypes.byref(address), ctypes.c_size_t(allocation_bytes)) == 0
    _state["bytes"] += allocation_bytes
    library.gpuleak_flush()
    _edit_nvml_state(os.getpid(), CONTEXT_BYTES + _state["bytes"])
    return address.value


def leave(status=0):
    """Ends the process: its context goes (the stand-in NVML stops listing it)."""
    _edit_nvml_state(os.getpid(), 0)
    if _state["collector"] is not None:
        _state["collector"].gpuleak_flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
