"""Backward-pass allocations blamed on the line that called backward().

On a GPU, PyTorch runs the backward pass on autograd's engine thread, which
runs no Python code: the gradients and temporaries it allocates have stacks
that end in PyTorch's C++. While `backward()` or `torch.autograd.grad()` runs,
the thread that called it waits for the engine; this module makes that
thread lend its Python frames to the collector for the duration of the call
(gpuleak_lend_python_stack, see src/collector/lent_python_stack.h), so the
engine's allocations name the program's `loss.backward()` line, with the
backward node (AddmmBackward0, ...) still in their native frames.

It wraps torch.autograd.graph._engine_run_backward, the one function both
backward() and grad() call (torch >= 2.2), in the two modules that hold it.
The wrapper passes every argument and the result through unchanged and
ends the loan whatever happens; it costs two calls into the collector per
backward pass. Older torch has no such function: nothing is wrapped.
GPULEAK_BACKWARD_LINES=0 turns it off.
"""

import os

from gpuleak._notice import say_once


def lend_stacks_during_backward(torch, collector):
    """Installs the wrapper once. Returns True when installed. Never raises."""
    try:
        if os.environ.get("GPULEAK_BACKWARD_LINES", "1") == "0":
            return False
        lend = getattr(collector.library, "gpuleak_lend_python_stack", None)
        graph = getattr(getattr(torch, "autograd", None), "graph", None)
        original = getattr(graph, "_engine_run_backward", None)
        if lend is None or original is None or getattr(original, "__gpuleak_lends__", False):
            return False
        import ctypes
        import functools

        lend.argtypes = [ctypes.c_int]
        lend.restype = None

        @functools.wraps(original)
        def _engine_run_backward(*args, **kwargs):
            lend(1)
            try:
                return original(*args, **kwargs)
            finally:
                lend(0)

        _engine_run_backward.__gpuleak_lends__ = True
        graph._engine_run_backward = _engine_run_backward
        autograd = torch.autograd
        if getattr(autograd, "_engine_run_backward", None) is original:
            autograd._engine_run_backward = _engine_run_backward
        return True
    except Exception as error:
        say_once("backward-lines", "backward-pass allocations keep their C++ stacks only (%s)" % error)
        return False
