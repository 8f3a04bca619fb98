"""Tensor-level tracking through PyTorch's own caching allocator.

PyTorch's default allocator hands tensors blocks carved from large driver
segments, so the CUDA driver (and CUPTI) never sees individual tensors. Its
trace tracker does: this module compiles a tiny C++ shim against the
installed torch (once, cached), attaches it, and forwards each tensor
allocation and free request to the gpuleak collector.

This keeps PyTorch's allocator and its speed; the alternative (switching to
the cudaMallocAsync backend so that the driver sees every tensor) costs
1.1-1.6x in launch-bound loops (see docs/torch.md).
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_allocator_hook.cpp")


def _cache_dir():
    base = os.environ.get("GPULEAK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpuleak"
    )
    return base


def shim_path(torch):
    """Where the shim for this torch build lives (it may not exist yet)."""
    return _shim_path_for(str(torch.__version__), os.path.dirname(torch.__file__))


def _shim_path_for(version, package_folder):
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + version.encode() + package_folder.encode()).hexdigest()[:16]
    return os.path.join(_cache_dir(), "torch-hook-%s.so" % digest)


def installed_shim_path():
    """shim_path() of the torch this Python would import, found without importing it.

    Importing torch takes seconds; `gpuleak run` asks before every program,
    also one that never uses torch. None when torch is not installed or its
    version cannot be read from torch/version.py.
    """
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None
    folder = os.path.dirname(spec.origin)
    try:
        with open(os.path.join(folder, "version.py")) as f:
            text = f.read()
    except OSError:
        return None
    found = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return _shim_path_for(found.group(1), folder) if found else None


def build_shim(torch, output):
    """Compiles the shim for the installed torch. Returns (ok, message)."""
    from torch.utils import cpp_extension

    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not compiler:
        return False, "no C++ compiler (g++) to build the PyTorch allocator hook"
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    try:
        includes = cpp_extension.include_paths(device_type="cuda")
    except TypeError:  # torch < 2.6
        includes = cpp_extension.include_paths(cuda=True)
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    os.makedirs(os.path.dirname(output), exist_ok=True)
    partial = output + ".%d.tmp" % os.getpid()
    command = [
        compiler,
        "-O1",
        "-shared",
        "-fPIC",
        "-std=c++20",
        "-w",
        "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi,
        _SOURCE,
        "-o",
        partial,
        "-L" + torch_lib,
        "-lc10",
        "-lc10_cuda",
        "-ldl",
        "-Wl,-rpath," + torch_lib,
    ]
    for path in includes:
        command.insert(1, "-I" + path)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        return False, "building the PyTorch allocator hook failed:\n" + result.stdout[-2000:]
    os.replace(partial, output)
    return True, output


def attach(torch, collector):
    """Attaches the tracker. `collector` is the ctypes handle of the collector.

    Must run after CUDA's lazy initialization (the allocator only attaches
    trackers to devices it has set up). Returns (ok, message).
    """
    path = shim_path(torch)
    if not os.path.exists(path):
        ok, message = build_shim(torch, path)
        if not ok:
            return False, message
    shim = ctypes.CDLL(path)
    alloc_fn = ctypes.cast(collector.gpuleak_record_torch_alloc, ctypes.c_void_p)
    free_fn = ctypes.cast(collector.gpuleak_record_torch_free, ctypes.c_void_p)
    # Backward-pass blocks named by their autograd node (collectors before it
    # have no such entry: those blocks are then recorded like the others).
    # GPULEAK_BACKWARD_NATIVE_STACKS=1 unwinds them: the node is not even asked.
    in_node = (
        None
        if os.environ.get("GPULEAK_BACKWARD_NATIVE_STACKS") == "1"
        else getattr(collector, "gpuleak_record_torch_alloc_in_node", None)
    )
    alloc_in_node_fn = ctypes.cast(in_node, ctypes.c_void_p) if in_node is not None else None
    shim.gpuleak_attach_torch_tracker.restype = ctypes.c_int
    shim.gpuleak_attach_torch_tracker.argtypes = [ctypes.c_void_p] * 3
    if not shim.gpuleak_attach_torch_tracker(alloc_fn, free_fn, alloc_in_node_fn):
        return False, "PyTorch refused the allocator trace tracker"
    return True, path


def _build_ahead():
    """`python3 -m gpuleak.torch_hook --build`: compiles the shim now; exit 0 or 1.

    `gpuleak run` calls it before starting the program, so the program does
    not wait for the compiler at its CUDA initialization. The GIL-free Python
    frame reader is built first (its failure only costs Python lines of
    allocations made without the GIL, so it does not change the exit status).
    """
    from gpuleak import frame_reader

    reader = frame_reader.reader_path()
    done, text = (True, reader) if os.path.exists(reader) else frame_reader.build(reader)
    print("gpuleak: %s the Python frame reader: %s" % ("built" if done else "could not build", text))
    ready = installed_shim_path()
    if ready is not None and os.path.exists(ready):
        # Built before: no need to import torch (seconds) to know.
        print("gpuleak: the allocator hook is built: %s" % ready)
        return 0
    try:
        import torch
    except Exception as error:
        print("gpuleak: cannot import torch (%s); no allocator hook to build" % error)
        return 1
    if getattr(torch.version, "cuda", None) is None:
        print("gpuleak: torch %s was built without CUDA; there is no CUDA allocator to hook" % torch.__version__)
        return 1
    path = shim_path(torch)
    if os.path.exists(path):
        print("gpuleak: the allocator hook for torch %s is built: %s" % (torch.__version__, path))
        return 0
    try:
        ok, message = build_shim(torch, path)
    except Exception as error:
        ok, message = False, "%s: %s" % (type(error).__name__, error)
    if ok:
        print("gpuleak: built the allocator hook for torch %s: %s" % (torch.__version__, message))
        return 0
    print("gpuleak: could not build the allocator hook for torch %s: %s" % (torch.__version__, message))
    return 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        sys.exit(_build_ahead())
    print("usage: python3 -m gpuleak.torch_hook --build")
    sys.exit(2)
