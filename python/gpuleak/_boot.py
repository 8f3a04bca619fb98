"""Starts gpuleak in a Python process run by `gpuleak run`, without code changes.

python/boot/sitecustomize.py calls install() when GPULEAK_COLLECTOR is set.
install() imports nothing heavy and sets up nothing but an import watcher:
a program that never imports torch pays one string comparison per import.

On Python 3.12+ it also asks sys.monitoring for the back-edges of the main
script's loops (python_loop.py), a step source for programs that mark none.

When torch is imported (right after torch/__init__.py has run):
  * the global optimizer step hooks mark step boundaries (_steps.py);
    torch < 2.0 has no global hooks: Optimizer._optimizer_step_code, which
    torch's step wrapper calls after every step(), is wrapped instead;
  * every batch a DataLoader iterator hands out marks a step of that
    DataLoader's clock (one clock per dataset; evaluation loops mostly have no optimizer);
  * a CUDA lazy-init callback (torch.cuda._lazy_call) runs once CUDA is up:
    it attaches the allocator trace tracker when GPULEAK_TORCH_MODE is
    `hook` or `user`, writes the `torch_tracking` annotation in every mode,
    and starts memory sampling.
"""

import os
import sys

from gpuleak._import_watch import ImportWatcher
from gpuleak._notice import say_once


def install():
    """Arranges the setup for when torch is imported. Never raises."""
    try:
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "optim", None) is not None:
            on_torch_imported(torch)
        elif not any(isinstance(f, TorchImportWatcher) for f in sys.meta_path):
            sys.meta_path.insert(0, TorchImportWatcher())
    except Exception as error:
        say_once("boot", "could not start (%s); the program runs without gpuleak" % error)
    from gpuleak import _array_frameworks

    _array_frameworks.watch()  # CuPy's and JAX's arrays, when imported
    install_python_loop()


def install_python_loop():
    """The main script's loop as a step source (python_loop.py; Python 3.12+). Never raises.

    Loads no collector: its annotations wait for the first one loaded, its
    marks for the collector to be in the process."""
    try:
        from gpuleak import python_loop

        python_loop.install()
    except Exception as error:
        say_once("python-loop", "cannot follow the main script's loop (%s)" % error)


class TorchImportWatcher(ImportWatcher):
    """Runs on_torch_imported right after torch/__init__.py (_import_watch.py)."""

    def __init__(self):
        super().__init__(("torch",), lambda name, module: on_torch_imported(module), _torch_unwatchable)


def _torch_unwatchable(name, loader):
    say_once(
        "boot-loader",
        "cannot watch the import of torch (its loader is %s); " "gpuleak marks no steps" % type(loader).__name__,
    )


def on_torch_imported(torch):
    """Registers the step hooks and the CUDA callback. Never raises."""
    try:
        from gpuleak import _collector, _runtime

        collector = _collector.load()
        if collector is None:
            return
        register_frame_reader(build_if_missing=True)
        clock = _runtime.clock()
        register_step_hooks(torch, clock)
        register_dataloader_clock(clock)
        lazy_call = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
        if lazy_call is None:
            say_once(
                "cuda-hook",
                "torch %s has no torch.cuda._lazy_call; no allocator hook "
                "and no memory samples" % getattr(torch, "__version__", "?"),
            )
            return
        lazy_call(lambda: on_cuda_initialized(torch, collector, clock))
    except Exception as error:
        say_once(
            "torch-setup", "setting up for torch failed (%s); the program runs " "without gpuleak's step hooks" % error
        )


_frame_reader_registered = False


def register_frame_reader(build_if_missing):
    """Gives the collector the GIL-free Python frame reader (frame_reader.py), once.

    PyTorch releases the GIL while an operator runs; without the reader,
    tensor allocations would get native stacks only.
    """
    global _frame_reader_registered
    if _frame_reader_registered:
        return
    from gpuleak import _collector

    collector = _collector.load()
    if collector is None:
        return
    from gpuleak import frame_reader

    ok, message = frame_reader.register(collector.library, build_if_missing)
    if ok:
        _frame_reader_registered = True
    elif build_if_missing:
        say_once(
            "frame-reader",
            "Python lines of allocations made while the GIL is released are "
            "not available (%s)" % short_reason(message),
        )


def register_step_hooks(torch, clock):
    optimizer_module = getattr(getattr(torch, "optim", None), "optimizer", None)
    if optimizer_module is None:
        import torch.optim.optimizer as optimizer_module

    post = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    pre = getattr(optimizer_module, "register_optimizer_step_pre_hook", None)
    if post is not None:
        if pre is not None:
            pre(clock.on_optimizer_step_started)
        post(clock.on_optimizer_step_finished)
        return
    optimizer_class = optimizer_module.Optimizer
    after_step = optimizer_class.__dict__.get("_optimizer_step_code")
    if after_step is None:
        say_once(
            "step-hook",
            "torch %s has no optimizer step hook; call gpuleak.step() at the "
            "end of each training step" % torch.__version__,
        )
        return
    finished = clock.on_optimizer_step_finished

    def _optimizer_step_code(self):
        after_step(self)
        finished(self)

    _optimizer_step_code.__wrapped__ = after_step
    optimizer_class._optimizer_step_code = _optimizer_step_code


def register_dataloader_clock(clock):
    """Wraps DataLoader iterators' __next__ so each batch handed out marks a step of a clock.

    One wrapper call per batch (about a microsecond); the clock is numbered
    per dataset and described once in the trace (`iteration_clock`).
    """
    try:
        from torch.utils.data import dataloader
    except Exception as error:
        say_once("dataloader-clock", "DataLoader batches are not counted (%s)" % error)
        return
    base = getattr(dataloader, "_BaseDataLoaderIter", None)
    original = getattr(base, "__next__", None) if base is not None else None
    if original is None or getattr(original, "__gpuleak_wrapped__", False):
        return
    from gpuleak import _collector

    numbers = {}  # id(dataset) -> clock number

    def clock_of(iterator):
        dataset = getattr(iterator, "_dataset", None)
        key = id(dataset)
        number = numbers.get(key)
        if number is None:
            number = len(numbers) + 1
            numbers[key] = number
            name = type(dataset).__name__ if dataset is not None else "a dataset"
            try:
                import json

                clock.collector.annotate(
                    "iteration_clock",
                    json.dumps(
                        {
                            "source": _collector.STEP_FROM_DATALOADER,
                            "clock": number,
                            "description": "batches of the DataLoader over %s" % name,
                        }
                    ),
                )
            except Exception:
                pass
        return number

    def __next__(self):
        batch = original(self)
        try:
            clock.dataloader_batch(clock_of(self))
        except Exception as error:
            say_once("dataloader-clock", "counting DataLoader batches failed (%s)" % error)
        return batch

    __next__.__wrapped__ = original
    __next__.__gpuleak_wrapped__ = True
    base.__next__ = __next__


def allocator_backend(torch):
    try:
        return torch.cuda.get_allocator_backend()  # torch >= 2.0
    except Exception:
        return "native"


def on_cuda_initialized(torch, collector, clock):
    """Runs inside torch's CUDA lazy init: must never raise (torch would fail the program)."""
    try:
        import json

        mode = os.environ.get("GPULEAK_TORCH_MODE", "off")
        alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""
        tracking = {
            "mode": "driver-only",
            "alloc_conf": alloc_conf,
            "torch": str(getattr(torch, "__version__", "?")),
            "hook_error": None,
        }
        backend = allocator_backend(torch)
        if backend == "cudaMallocAsync":
            tracking["mode"] = "cudaMallocAsync"
        elif mode in ("hook", "user"):
            ok, message = attach_allocator_hook(torch, collector)
            if ok:
                tracking["mode"] = "allocator-hook"
            else:
                tracking["hook_error"] = message
                say_once(
                    "allocator-hook",
                    "the PyTorch allocator hook is off (%s); tensors are "
                    "seen through driver calls only" % short_reason(message),
                )
        elif mode == "async":
            tracking["hook_error"] = "GPULEAK_TORCH_MODE=async, but torch uses the %s " "allocator backend" % backend
        collector.annotate("torch_tracking", json.dumps(tracking))
        from gpuleak._distributed import distributed_role

        distributed = distributed_role(os.environ)
        if distributed:
            collector.annotate("distributed", json.dumps(distributed))
        from gpuleak._process_role import annotate_process_role, install_exit_marker

        annotate_process_role(collector)
        install_exit_marker(collector)
        try:
            from gpuleak._backward_lines import lend_stacks_during_backward

            lend_stacks_during_backward(torch, collector)
        except Exception as error:  # backward lines are a refinement: the rest stays on
            say_once("backward-lines", "lending Python stacks to backward failed (%s)" % error)
        from gpuleak._memory_samples import MemorySampler

        clock.sampler = MemorySampler(torch, collector, tracking["mode"] == "cudaMallocAsync")
    except Exception as error:
        say_once("cuda-setup", "setting up after CUDA initialization failed (%s)" % error)


def short_reason(message):
    """One line of a (compiler) message for stderr: the first error line, or the first line."""
    lines = [line.strip() for line in str(message or "unknown error").splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower() and line != lines[0]:
            return line[:200]
    return (lines[0] if lines else "unknown error")[:200]


def attach_allocator_hook(torch, collector):
    try:
        from gpuleak import torch_hook

        if not os.path.exists(torch_hook.shim_path(torch)):
            say_once(
                "hook-build",
                "building the PyTorch allocator hook for torch %s (once; "
                "`python3 -m gpuleak.torch_hook --build` does it ahead)" % torch.__version__,
            )
        return torch_hook.attach(torch, collector.library)
    except Exception as error:
        return False, "%s: %s" % (type(error).__name__, error)
