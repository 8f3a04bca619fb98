"""The GIL-free Python frame reader (python/gpuleak/python_frame_reader.c).

PyTorch releases the GIL while an operator allocates; these tests allocate
through the collector from threads that released the GIL (ctypes.CDLL does)
and check that the allocation is still blamed on the right Python line.
"""
import json
import os
import subprocess
import sysconfig

import pytest

from conftest import build_dir

HEADERS = os.path.join(sysconfig.get_paths()["include"], "internal", "pycore_frame.h")


def gpuleak_cli():
    path = os.path.join(build_dir(), "gpuleak")
    if not os.path.exists(path):
        pytest.skip("no gpuleak binary at %s" % path)
    return path


def report(trace_dir):
    # Traced without `gpuleak run`, so no source lines were captured: read
    # them from the program's folder, named as the checkout.
    checkout = os.path.dirname(trace_dir)
    out = subprocess.run(
        [gpuleak_cli(), "report", "--json", "--source-root", checkout, trace_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["processes"][0]


PROGRAM = """
import ctypes, threading
released = ctypes.CDLL(_os.environ["GPULEAK_COLLECTOR"])  # calls release the GIL
if _os.environ.get("WITH_READER") == "1":
    from gpuleak import frame_reader
    ok, message = frame_reader.register(_traced_collector)
    assert ok, message

def allocate_without_gil(address):
    released.gpuleak_record_torch_alloc(ctypes.c_uint64(address), ctypes.c_uint64(4096), 0, ctypes.c_uint64(0))  # MAIN

def deeper(address, depth):
    if depth == 0:
        allocate_without_gil(address)
    else:
        deeper(address, depth - 1)

deeper(0x1000, 3)
worker = threading.Thread(target=deeper, args=(0x2000, 1))
worker.start()
worker.join()
leave_traced_program()
"""


def marked_line(marker):
    return next(i for i, line in enumerate(PROGRAM.splitlines(), 1) if "# " + marker in line)


@pytest.mark.skipif(not os.path.exists(HEADERS), reason="Python's headers are not installed (python3-dev)")
def test_allocations_made_without_the_gil_get_their_python_line(run_traced):
    run = run_traced(PROGRAM, extra_env={"WITH_READER": "1"})
    assert run.returncode == 0, run.stderr
    process = report(run.trace_dir)
    groups = process["leaks"]["groups"]
    assert process["leaks"]["allocations"] == 2
    # The prelude adds its own lines before the program: compare by the marker's text.
    labels = {(g["site"]["function"], g["site"]["source_line"].endswith("# MAIN")) for g in groups}
    assert labels == {("allocate_without_gil", True)}
    frames = [f for g in groups for f in g["frames"] if f["language"] == "python"]
    functions = [f["function"] for f in frames]
    assert functions.count("deeper") >= 2 and "<module>" in functions  # main thread: the whole chain
    assert "Thread.run" in functions  # the worker thread's own frames


def test_without_the_reader_such_allocations_have_native_frames_only(run_traced):
    run = run_traced(PROGRAM, extra_env={"WITH_READER": "0"})
    assert run.returncode == 0, run.stderr
    process = report(run.trace_dir)
    for group in process["leaks"]["groups"]:
        assert all(f["language"] == "native" for f in group["frames"])


@pytest.mark.skipif(not os.path.exists(HEADERS), reason="Python's headers are not installed (python3-dev)")
def test_reader_builds_for_this_python_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEAK_CACHE_DIR", str(tmp_path))
    from gpuleak import frame_reader

    path = frame_reader.reader_path()
    assert path.startswith(str(tmp_path))
    ok, message = frame_reader.build(path)
    assert ok, message
    assert os.path.exists(path)


def shipped_package_dir():
    """The build's copy of the package, with the readers the build made ahead."""
    package = os.path.join(build_dir(), "python")
    if not os.path.isdir(os.path.join(package, "gpuleak", "_prebuilt")):
        pytest.skip("the build made no frame reader ahead (no Python headers at configure time)")
    return package


def test_shipped_reader_needs_no_compiler(run_traced, tmp_path):
    package = shipped_package_dir()
    # No compiler to find and an empty cache: only the shipped reader can serve.
    env = {
        "WITH_READER": "1",
        "CC": "/bin/false",
        "PATH": "/nonexistent",
        "PYTHONPATH": os.pathsep.join([os.path.join(package, "boot"), package]),
    }
    run = run_traced(PROGRAM, extra_env=env)
    assert run.returncode == 0, run.stderr
    process = report(run.trace_dir)
    labels = {g["site"]["function"] for g in process["leaks"]["groups"]}
    assert labels == {"allocate_without_gil"}
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.iterdir()), "a reader was compiled although one was shipped"


class _NoCollector:
    def __getattr__(self, name):
        raise AssertionError("the collector must not get a reader built for another Python")


def test_reader_of_another_python_version_is_refused(monkeypatch, tmp_path):
    package = shipped_package_dir()
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "shipped_frame_reader", os.path.join(package, "gpuleak", "frame_reader.py")
    )
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    shipped_file = shipped.prebuilt_path()
    if not os.path.exists(shipped_file):
        pytest.skip("no reader was built ahead for this Python")
    monkeypatch.setenv("GPULEAK_CACHE_DIR", str(tmp_path))
    # The same file name, but this "Python" is a minor version further on.
    monkeypatch.setattr(shipped.sys, "hexversion", shipped.sys.hexversion + 0x10000)
    ok, message = shipped.register(_NoCollector(), build_if_missing=False)
    assert not ok
    assert message == "the Python frame reader is not built"
