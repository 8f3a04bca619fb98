"""Sets up CuPy and JAX tracking when the program imports them (cupy_arrays.py, jax_arrays.py).

Through an import watcher (_import_watch.py), as torch's: the set-up runs right
after that package's own module code. A program that imports neither pays one
set lookup per import.
"""

import sys

from gpuleak._import_watch import ImportWatcher
from gpuleak._notice import say_once


def _register_frame_reader():
    """Python stacks for driver calls made with the GIL released (JAX's dispatch, CuPy's
    kernels' workspaces), as for torch (_boot.register_frame_reader)."""
    from gpuleak import _boot

    _boot.register_frame_reader(build_if_missing=True)


def _answer_holder_requests():
    """A CuPy or JAX loop marks no step in the process: the step clock (made on
    first use) brings the holder-request watcher, which answers between steps."""
    from gpuleak import _runtime

    _runtime.clock()


def _set_up_cupy(module):
    from gpuleak import _collector, cupy_arrays

    collector = _collector.load()
    if collector is not None:
        _register_frame_reader()
        cupy_arrays.install(module, collector)
        _answer_holder_requests()


def _set_up_jax(module):
    from gpuleak import _collector, jax_arrays

    collector = _collector.load()
    if collector is not None:
        _register_frame_reader()
        jax_arrays.install(module, collector)
        _answer_holder_requests()


SET_UP = {"cupy": _set_up_cupy, "jax": _set_up_jax}


def _set_up(name, module):
    try:
        SET_UP[name](module)
    except Exception as error:
        say_once("set-up-" + name, "setting up %s tracking failed (%s)" % (name, error))


def _unwatchable(name, loader):
    say_once("watch-" + name, "cannot watch the import of %s" % name)


class ArrayFrameworkWatcher(ImportWatcher):
    """Sets up CuPy or JAX tracking right after the package's own code (_import_watch.py)."""

    def __init__(self, names):
        super().__init__(names, _set_up, _unwatchable)


def watch():
    """Installs the watcher (or sets up what is already imported). Never raises."""
    try:
        missing = []
        for name, set_up in SET_UP.items():
            module = sys.modules.get(name)
            if module is not None:
                set_up(module)
            else:
                missing.append(name)
        if missing and not any(isinstance(f, ArrayFrameworkWatcher) for f in sys.meta_path):
            watcher = ArrayFrameworkWatcher(missing)
            # Ahead of the finders that would find cupy or jax; behind torch's
            # watcher, which stays first.
            at = next((i + 1 for i, f in enumerate(sys.meta_path) if type(f).__name__ == "TorchImportWatcher"), 0)
            sys.meta_path.insert(at, watcher)
    except Exception as error:
        say_once("array-frameworks", "CuPy/JAX tracking could not start (%s)" % error)
