"""CuPy array tracking: every block CuPy's memory pool hands to an array.

CuPy keeps freed blocks in its pool, so the driver sees a few large
cudaMalloc calls and nothing per array. A `cupy.cuda.MemoryHook` is told of
each block the pool hands out (malloc_postprocess) and takes back
(free_postprocess); this one passes them to the collector's C API
(gpuleak_record_array_alloc/free, include/gpuleak/collector_api.h, framework
1), which records them like PyTorch's blocks: tensor-level, with the Python
stack of the line that made the array (the hook runs on that thread, with
the GIL). No CuPy code is patched.

CuPy's memory hooks are per thread: the hook is entered on the thread that
imports cupy (the main thread in nearly every program); arrays made on other
threads are seen only through the driver. `install` never raises.
"""

import json

from gpuleak._notice import say_once
from gpuleak._vocabulary import FRAMEWORK_CUPY


def make_hook_class(memory_hook_base, record_alloc, record_free):
    """The hook class over CuPy's MemoryHook base (a function, so tests can pass a stand-in)."""

    class GpuleakArrayHook(memory_hook_base):
        name = "gpuleak"

        def malloc_postprocess(self, **kwargs):
            try:
                record_alloc(
                    int(kwargs["mem_ptr"]), int(kwargs["mem_size"]), int(kwargs.get("device_id", -1)), 0, FRAMEWORK_CUPY
                )
            except Exception as error:
                say_once("cupy-hook", "CuPy array tracking failed (%s)" % error)

        def free_postprocess(self, **kwargs):
            try:
                record_free(int(kwargs["mem_ptr"]), int(kwargs.get("device_id", -1)), FRAMEWORK_CUPY)
            except Exception as error:
                say_once("cupy-hook", "CuPy array tracking failed (%s)" % error)

    return GpuleakArrayHook


_installed = None


def install(cupy, collector):
    """Enters the hook on this thread and notes it in the trace; returns the hook or None."""
    global _installed
    if _installed is not None:
        return _installed
    try:
        base = cupy.cuda.memory_hook.MemoryHook
        hook_class = make_hook_class(base, collector.record_array_alloc, collector.record_array_free)
        hook = hook_class()
        hook.__enter__()
        _installed = hook
        collector.annotate(
            "framework_tracking",
            json.dumps(
                {
                    "framework": "CuPy",
                    "mode": "memory-hook",
                    "hidden_allocations": False,
                    "version": str(getattr(cupy, "__version__", "?")),
                }
            ),
        )
        return hook
    except Exception as error:
        say_once("cupy-hook", "CuPy array tracking is off (%s); CuPy's pool is seen through " "the driver only" % error)
        return None
