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
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpuleak"
    )


def abi_tag():
    """The Python a reader is built for: CPython's major and minor version and
    its ABI flags (cp311; cp313t for a free-threaded build, d for a debug one)."""
    return "cp%d%d%s" % (sys.version_info[0], sys.version_info[1], getattr(sys, "abiflags", ""))


def prebuilt_path():
    """Where a reader built ahead for this Python is shipped (it may not be)."""
    return os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "_prebuilt", "python-frame-reader-%s.so" % abi_tag()
    )


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


def _load_matching(path):
    """The reader at `path` if it was built for this Python's minor version, else None.

    A reader of another version would read another frame layout: the shipped
    one is checked, not trusted by its name alone.
    """
    reader = ctypes.CDLL(path)
    built_for = getattr(reader, "gpuleak_python_frame_reader_built_for", None)
    if built_for is None:
        return None
    built_for.restype = ctypes.c_uint
    return reader if built_for() == (sys.hexversion >> 16) else None


def register(collector_library, build_if_missing=True):
    """Loads the reader (the shipped one, a cached one, or one built now) and
    gives it to the collector.

    Returns (ok, message): the message is the reader's path, or why there is
    none. Never raises.
    """
    global _loaded
    try:
        if sys.implementation.name != "cpython":
            return False, "%s is not CPython; the frame reader reads CPython's frames" % sys.implementation.name
        reader = None
        path = prebuilt_path()
        if os.path.exists(path):
            reader = _load_matching(path)
        if reader is None:
            path = reader_path()
            if not os.path.exists(path):
                if not build_if_missing:
                    return False, "the Python frame reader is not built"
                ok, message = build(path)
                if not ok:
                    return False, message
            reader = _load_matching(path)
            if reader is None:
                return False, "the reader at %s was built for another Python" % path
        functions = [
            ctypes.cast(getattr(reader, name), ctypes.c_void_p)
            for name in ("gpuleak_python_frames", "gpuleak_python_line", "gpuleak_python_code_info")
        ]
        collector_library.gpuleak_set_python_frame_reader(*functions)
        _loaded = reader
        return True, path
    except Exception as error:
        return False, "%s: %s" % (type(error).__name__, error)


def _build_into(folder):
    """Builds this Python's reader into `folder` under its shipped name (the
    build and scripts/package run it with each Python they ship a reader for)."""
    target = os.path.join(folder, os.path.basename(prebuilt_path()))
    done, text = build(target)
    print("gpuleak: %s the Python frame reader for %s: %s" % ("built" if done else "could not build", abi_tag(), text))
    return 0 if done else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        target = reader_path()
        done, text = (True, target) if os.path.exists(target) else build(target)
        print("gpuleak: %s the Python frame reader: %s" % ("built" if done else "could not build", text))
        sys.exit(0 if done else 1)
    if len(sys.argv) == 3 and sys.argv[1] == "--build-into":
        sys.exit(_build_into(sys.argv[2]))
    if sys.argv[1:] == ["--can-build"]:
        # For the build: prints the shipped name when this Python's headers are there.
        ok = sys.version_info >= (3, 11) and os.path.exists(
            os.path.join(sysconfig.get_paths()["include"], "internal", "pycore_frame.h")
        )
        print(os.path.basename(prebuilt_path()) if ok else "")
        sys.exit(0)
    print("usage: python3 -m gpuleak.frame_reader --build | --build-into FOLDER | --can-build")
    sys.exit(2)
