"""Shared helpers for the Python package's tests.

Tests that start a traced child process need the collector and the trace
dump tool from a CMake build: GPULEAK_BUILD_DIR names it (CTest sets it);
without them those tests skip and say why.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.join(REPO, "python")
BOOT_DIR = os.path.join(PACKAGE_DIR, "boot")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

if PACKAGE_DIR not in sys.path:
    sys.path.insert(0, PACKAGE_DIR)

# Prepended to every traced child program. The child ends through
# leave_traced_program(): flush, then os._exit, because the collector can hang
# in its atexit handler when the process exits normally (it locks the main
# thread's buffer after glibc's thread_local destructors retired it and the
# writer freed it; reported to the collector's owner).
CHILD_PRELUDE = """
import ctypes as _ctypes, os as _os, sys as _sys
_traced_collector = _ctypes.PyDLL(_os.environ["GPULEAK_COLLECTOR"])
assert _traced_collector.gpuleak_start_recording() == 1, "the collector did not start"

def leave_traced_program(status=0):
    # os._exit skips the wait for holder walks still running (they answer in
    # the background): wait here, as a normal exit would.
    _walks = _sys.modules.get("gpuleak._forked_walk")
    if _walks is not None:
        _walks.wait_for_walks(40)
    _sys.stdout.flush()
    _sys.stderr.flush()
    _traced_collector.gpuleak_flush()
    _os._exit(status)

def _leave_on_uncaught_error(kind, value, traceback):
    _sys.__excepthook__(kind, value, traceback)
    leave_traced_program(1)

_sys.excepthook = _leave_on_uncaught_error
"""


def build_dir():
    return os.environ.get("GPULEAK_BUILD_DIR") or os.path.join(REPO, "build-py")


@pytest.fixture(scope="session")
def collector_path():
    path = os.path.join(build_dir(), "libgpuleak_collector.so")
    if not os.path.exists(path):
        pytest.skip(
            "no collector at %s: build it (cmake --build <build>) with the CUDA headers "
            "present, and set GPULEAK_BUILD_DIR" % path
        )
    return path


@pytest.fixture(scope="session")
def dump_tool():
    path = os.path.join(build_dir(), "gpuleak_test_trace_dump")
    if not os.path.exists(path):
        pytest.skip("no trace dump tool at %s: build target gpuleak_test_trace_dump" % path)
    return path


class TracedRun:
    def __init__(self, completed, trace_dir, dump_tool):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.trace_dir = trace_dir
        self.dump_tool = dump_tool

    def gpuleak_lines(self):
        """The lines the package wrote on stderr (torch 1.13 adds unrelated noise at exit)."""
        return [line for line in self.stderr.splitlines() if line.startswith("gpuleak:")]

    def records(self):
        traces = sorted(f for f in os.listdir(self.trace_dir) if f.endswith(".trace"))
        assert traces, "no trace written in %s; stderr:\n%s" % (self.trace_dir, self.stderr)
        out = []
        for name in traces:
            dumped = subprocess.run(
                [self.dump_tool, os.path.join(self.trace_dir, name)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
            assert dumped.returncode == 0, dumped.stderr
            out.extend(json.loads(line) for line in dumped.stdout.splitlines() if line)
        return out

    def steps(self):
        return [r for r in self.records() if r["type"] == "step"]

    def annotations(self, key):
        return [json.loads(r["value"]) for r in self.records() if r["type"] == "annotation" and r["key"] == key]


@pytest.fixture
def run_traced(tmp_path, collector_path, dump_tool):
    """Runs a program in a child /usr/bin/python3 booted like `gpuleak run` would."""

    def run(program, extra_env=None, timeout=120, prelude=True):
        script = tmp_path / "program.py"
        body = textwrap.dedent(program)
        script.write_text((CHILD_PRELUDE if prelude else "") + body)
        trace_dir = tmp_path / "traces"
        env = dict(os.environ)
        env.pop("PYTHONSTARTUP", None)
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([BOOT_DIR, PACKAGE_DIR]),
                "GPULEAK_COLLECTOR": collector_path,
                "GPULEAK_TRACE_DIR": str(trace_dir),
                "GPULEAK_CACHE_DIR": str(tmp_path / "cache"),
                "GPULEAK_FLUSH_MS": "20",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        env.update(extra_env or {})
        completed = subprocess.run(
            [PYTHON, str(script)],
            cwd=str(tmp_path),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
        return TracedRun(completed, str(trace_dir), dump_tool)

    return run


@pytest.fixture(autouse=True)
def fresh_notices():
    """Each test sees the package's say-once notices as a new process would."""
    from gpuleak import _notice

    _notice._said.clear()
    yield
