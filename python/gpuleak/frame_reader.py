"""The GIL-free Python frame reader (python_frame_reader.c).

PyTorch releases the GIL while an operator runs, so the collector cannot
read Python frames through the public C API when a tensor is allocated (and
must never take the GIL itself). The reader reads the calling thread's own
frames directly; the frame layout is internal to CPython, so the reader is
compiled against the headers of the running Python, once, and cached.

Without a C compiler or Python's headers, the collector falls back to
reading frames only on threads that hold the GIL.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_frame_reader.c")
_loaded = None  # the loaded reader library; kept for the life of the process


def _cache_dir():
    return os.environ.get("GPULEAK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpuleak")


def reader_path():
    include = sysconfig.get_paths()["include"]
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + sys.version.encode() + include.encode()).hexdigest()[:16]
    return os.path.join(_cache_dir(), "python-frame-reader-%s.so" % digest)


def build(output):
    """Compiles the reader for this Python. Returns (ok, message)."""
    if sys.version_info < (3, 11):
        return False, "Python %d.%d has no frame layout the reader knows (3.11 or newer)" % sys.version_info[:2]
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "internal", "pycore_frame.h")):
        return False, "Python's headers are not installed (%s/internal/pycore_frame.h)" % include
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        return False, "no C compiler (gcc) to build the Python frame reader"
    os.makedirs(os.path.dirname(output), exist_ok=True)
    partial = output + ".%d.tmp" % os.getpid()
    command = [compiler, "-O2", "-shared", "-fPIC", "-w", "-I" + include, _SOURCE, "-o", partial]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        return False, "building the Python frame reader failed:\n" + result.stdout[-2000:]
    os.replace(partial, output)
    return True, output


def register(collector_library, build_if_missing=True):
    """Loads the reader (building it if needed) and gives it to the collector.

    Returns (ok, message). Never raises.
    """
    global _loaded
    try:
        path = reader_path()
        if not os.path.exists(path):
            if not build_if_missing:
                return False, "the Python frame reader is not built"
            ok, message = build(path)
            if not ok:
                return False, message
        reader = ctypes.CDLL(path)
        functions = [ctypes.cast(getattr(reader, name), ctypes.c_void_p) for name in
                     ("gpuleak_python_frames", "gpuleak_python_line", "gpuleak_python_code_info")]
        collector_library.gpuleak_set_python_frame_reader(*functions)
        _loaded = reader
        return True, path
    except Exception as error:
        return False, "%s: %s" % (type(error).__name__, error)


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        target = reader_path()
        done, text = (True, target) if os.path.exists(target) else build(target)
        print("gpuleak: %s the Python frame reader: %s" % ("built" if done else "could not build", text))
        sys.exit(0 if done else 1)
    print("usage: python3 -m gpuleak.frame_reader --build")
    sys.exit(2)
