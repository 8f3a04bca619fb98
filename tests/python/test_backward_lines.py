"""Backward-pass allocations borrow the Python stack of the thread that called
backward() (src/collector/lent_python_stack.h, python/gpuleak/_backward_lines.py).

The real-process test stands a native thread in for autograd's engine thread:
a tiny C library, compiled here, starts a pthread that runs no Python code and
records one tensor allocation through the collector's C API, as the engine's
allocations reach it through the allocator hook. While the main thread lends
its stack, that allocation must be blamed on the main thread's line; without
the loan it has native frames only.
"""
import json
import os
import shutil
import subprocess
import sysconfig
import types

import pytest

from conftest import build_dir

HEADERS = os.path.join(sysconfig.get_paths()["include"], "internal", "pycore_frame.h")
ENGINE_SOURCE = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
typedef void (*record_fn)(uint64_t, uint64_t, int, uint64_t);
static record_fn record;
static uint64_t next_address;
static void* engine_thread(void* unused) {
  (void)unused;
  record(next_address, 4096, 0, 0);
  return 0;
}
typedef void (*record_in_node_fn)(uint64_t, uint64_t, int, uint64_t, uint64_t);
static record_in_node_fn record_in_node;
static uint64_t node_type;
static void* node_thread(void* unused) {
  (void)unused;
  record_in_node(next_address, 4096, 0, 0, node_type);
  return 0;
}
/* As the allocator hook forwards a block allocated while an autograd node
   runs: with the node's vtable, here std::bad_alloc's (libstdc++ exports its
   symbol; the vtable's address point is two words past its start). */
int run_node_thread(const char* collector, uint64_t address) {
  void* library = dlopen(collector, RTLD_NOW | RTLD_NOLOAD);
  if (!library) return -1;
  record_in_node = (record_in_node_fn)dlsym(library, "gpuleak_record_torch_alloc_in_node");
  if (!record_in_node) return -2;
  char* vtable = (char*)dlsym(RTLD_DEFAULT, "_ZTVSt9bad_alloc");
  if (!vtable) return -4;
  node_type = (uint64_t)(vtable + 2 * sizeof(void*));
  next_address = address;
  pthread_t thread;
  if (pthread_create(&thread, 0, node_thread, 0) != 0) return -3;
  pthread_join(thread, 0);
  return 0;
}
int run_engine_thread(const char* collector, uint64_t address) {
  void* library = dlopen(collector, RTLD_NOW | RTLD_NOLOAD);
  if (!library) return -1;
  record = (record_fn)dlsym(library, "gpuleak_record_torch_alloc");
  if (!record) return -2;
  next_address = address;
  pthread_t thread;
  if (pthread_create(&thread, 0, engine_thread, 0) != 0) return -3;
  pthread_join(thread, 0);
  return 0;
}
"""

PROGRAM = """
import ctypes
from gpuleak import frame_reader
ok, message = frame_reader.register(_traced_collector)
assert ok, message
engine = ctypes.CDLL(_os.environ["ENGINE_LIBRARY"])
lend = _traced_collector.gpuleak_lend_python_stack
lend.argtypes = [ctypes.c_int]

def run_backward(address):
    return engine.run_engine_thread(_os.environ["GPULEAK_COLLECTOR"].encode(), ctypes.c_uint64(address))

def backward(address):  # what _backward_lines wraps around torch's engine call
    lend(1)  # LEND
    try:
        assert run_backward(address) == 0
    finally:
        lend(0)

def train():
    backward(0x3000)  # BACKWARD

train()
assert run_backward(0x4000) == 0  # no loan: native frames only
leave_traced_program()
"""


@pytest.fixture(scope="module")
def engine_library(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("engine")
    source, library = folder / "engine.c", folder / "libengine.so"
    source.write_text(ENGINE_SOURCE)
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(source), "-lpthread", "-ldl"], check=True
    )
    return str(library)


@pytest.mark.skipif(not os.path.exists(HEADERS), reason="Python's headers are not installed (python3-dev)")
def test_an_allocation_on_a_thread_without_python_is_blamed_on_the_lending_line(run_traced, engine_library):
    gpuleak = os.path.join(build_dir(), "gpuleak")
    if not os.path.exists(gpuleak):
        pytest.skip("no gpuleak binary at %s" % gpuleak)
    run = run_traced(PROGRAM, extra_env={"ENGINE_LIBRARY": engine_library})
    assert run.returncode == 0, run.stderr
    # The program's source is read from its folder (report reads sources only
    # from the trace or from --source-root: docs/security.md).
    source_root = os.path.dirname(str(run.trace_dir))
    out = subprocess.run(
        [gpuleak, "report", "--json", "--source-root", source_root, run.trace_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    groups = json.loads(out.stdout)["processes"][0]["leaks"]["groups"]
    assert len(groups) == 2, groups
    lent = [g for g in groups if any(f["language"] == "python" for f in g["frames"])]
    assert len(lent) == 1, groups
    # The lender's frames as they were when it lent: innermost the lending
    # line (in gpuleak's wrapper, an internal frame), then the program's call.
    assert lent[0]["site"]["function"] == "backward"
    assert lent[0]["site"]["source_line"].endswith("# LEND")
    python = [f for f in lent[0]["frames"] if f["language"] == "python"]
    assert [f["function"] for f in python][:2] == ["backward", "train"]
    assert "run_backward" not in [f["function"] for f in python]  # the engine thread ran no Python
    other = [g for g in groups if g is not lent[0]][0]
    assert all(f["language"] == "native" for f in other["frames"])


NODE_PROGRAM = """
import ctypes
ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)  # the node class's library
engine = ctypes.CDLL(_os.environ["ENGINE_LIBRARY"])
assert engine.run_node_thread(_os.environ["GPULEAK_COLLECTOR"].encode(), ctypes.c_uint64(0x5000)) == 0
leave_traced_program()
"""


@pytest.mark.parametrize("native_stacks", ["0", "1"])
def test_a_block_allocated_in_an_autograd_node_is_named_by_the_node_not_unwound(
    run_traced, engine_library, native_stacks
):
    gpuleak = os.path.join(build_dir(), "gpuleak")
    if not os.path.exists(gpuleak):
        pytest.skip("no gpuleak binary at %s" % gpuleak)
    run = run_traced(
        NODE_PROGRAM, extra_env={"ENGINE_LIBRARY": engine_library, "GPULEAK_BACKWARD_NATIVE_STACKS": native_stacks}
    )
    assert run.returncode == 0, run.stderr
    out = subprocess.run(
        [gpuleak, "report", "--json", run.trace_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    groups = json.loads(out.stdout)["processes"][0]["leaks"]["groups"]
    assert len(groups) == 1, groups
    functions = [f.get("function", "") for f in groups[0]["frames"] if f["language"] == "native"]
    if native_stacks == "0":
        # One frame: the node's class, symbolized from its vtable.
        assert functions == ["vtable for std::bad_alloc"], groups[0]["frames"]
    else:
        # Unwound as any thread without Python: the thread's own frames.
        assert "node_thread" in functions, functions
        assert not any(f.startswith("vtable for") for f in functions), functions


class _FakeEntry:
    """Stands in for a ctypes function: callable, and takes argtypes/restype."""

    def __init__(self, calls):
        self.calls = calls

    def __call__(self, value):
        self.calls.append(value)


class _FakeLibrary:
    def __init__(self):
        self.calls = []
        self.gpuleak_lend_python_stack = _FakeEntry(self.calls)


def fake_torch(run_backward):
    graph = types.SimpleNamespace(_engine_run_backward=run_backward)
    autograd = types.SimpleNamespace(graph=graph, _engine_run_backward=run_backward)
    return types.SimpleNamespace(autograd=autograd)


def test_the_wrapper_passes_results_and_errors_through_and_always_ends_the_loan(monkeypatch):
    from gpuleak import _backward_lines

    monkeypatch.delenv("GPULEAK_BACKWARD_LINES", raising=False)

    def run_backward(*args, **kwargs):
        if kwargs.get("fail"):
            raise RuntimeError("element 0 of tensors does not require grad")
        return ("grads", args, kwargs)

    torch = fake_torch(run_backward)
    collector = types.SimpleNamespace(library=_FakeLibrary())
    assert _backward_lines.lend_stacks_during_backward(torch, collector)
    wrapped = torch.autograd.graph._engine_run_backward
    assert torch.autograd._engine_run_backward is wrapped  # both names that hold it
    assert wrapped(1, 2, inputs=3) == ("grads", (1, 2), {"inputs": 3})
    with pytest.raises(RuntimeError, match="does not require grad"):
        wrapped(fail=True)
    assert collector.library.calls == [1, 0, 1, 0]
    assert not _backward_lines.lend_stacks_during_backward(torch, collector)  # once only


def test_the_wrapper_is_off_when_asked_or_when_torch_has_no_engine_entry(monkeypatch):
    from gpuleak import _backward_lines

    collector = types.SimpleNamespace(library=_FakeLibrary())
    monkeypatch.setenv("GPULEAK_BACKWARD_LINES", "0")
    assert not _backward_lines.lend_stacks_during_backward(fake_torch(lambda: None), collector)
    monkeypatch.delenv("GPULEAK_BACKWARD_LINES")
    old_torch = types.SimpleNamespace(autograd=types.SimpleNamespace(graph=types.SimpleNamespace()))
    assert not _backward_lines.lend_stacks_during_backward(old_torch, collector)
