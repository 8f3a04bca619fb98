"""CuPy and JAX tracking (cupy_arrays.py, jax_arrays.py, _array_frameworks.py), through stand-ins.

Neither CuPy nor JAX runs here (no GPU): each test writes a small stand-in
package with the API the adapter uses -- CuPy's per-thread MemoryHook that a
memory pool calls for every block it hands out and takes back, JAX's
devices() with memory_stats() -- and runs a real traced child that imports
it the way a program would. The trace must then hold what the adapter
recorded; the GPU suite `clients` runs the real libraries.
"""

import json
import os
import subprocess

from conftest import BOOT_DIR, PACKAGE_DIR, build_dir

STAND_IN_CUPY = {
    "cupy/__init__.py": """
from cupy import cuda
from cupy.cuda import memory_hook
__version__ = "stand-in"

class MemoryPointer:
    def __init__(self, ptr):
        self.ptr = ptr

class ndarray:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.ptr = cuda.POOL.malloc(nbytes)
        self.data = MemoryPointer(self.ptr)  # CuPy's arrays say where they are in .data.ptr
    def __del__(self):
        cuda.POOL.free(self.ptr, self.nbytes)

def empty(nbytes):
    return ndarray(nbytes)
""",
    "cupy/cuda/__init__.py": '''
from cupy.cuda import memory_hook
from cupy.cuda.memory_hook import MemoryHook

class Pool:
    """Hands out 512-byte-rounded blocks and keeps freed ones, as CuPy's pool does."""
    def __init__(self):
        self.next, self.free_blocks = 0x7a0000000000, {}
    def malloc(self, size):
        rounded = (size + 511) // 512 * 512
        blocks = self.free_blocks.setdefault(rounded, [])
        ptr = blocks.pop() if blocks else self.take(rounded)
        for hook in memory_hook.hooks():
            hook.malloc_postprocess(device_id=0, size=size, mem_size=rounded, mem_ptr=ptr, pmem_id=1)
        return ptr
    def take(self, rounded):
        ptr, self.next = self.next, self.next + rounded
        return ptr
    def free(self, ptr, size):
        rounded = (size + 511) // 512 * 512
        self.free_blocks.setdefault(rounded, []).append(ptr)
        for hook in memory_hook.hooks():
            hook.free_postprocess(device_id=0, mem_size=rounded, mem_ptr=ptr, pmem_id=1)

POOL = Pool()
''',
    "cupy/cuda/memory_hook.py": """
import threading
_local = threading.local()

def hooks():
    return list(getattr(_local, "hooks", {}).values())

class MemoryHook:
    name = "MemoryHook"
    def __enter__(self):
        if not hasattr(_local, "hooks"):
            _local.hooks = {}
        _local.hooks[self.name] = self
        return self
    def __exit__(self, *exc):
        _local.hooks.pop(self.name, None)
    def malloc_postprocess(self, **kwargs):
        pass
    def free_postprocess(self, **kwargs):
        pass
""",
}

STAND_IN_JAX = {
    "jax/__init__.py": """
class Device:
    platform, id = "gpu", 0
    def __init__(self):
        self.in_use = 1 << 20
    def memory_stats(self):
        self.in_use += 4096
        return {"bytes_in_use": self.in_use, "bytes_limit": 64 << 30}

_device = Device()

def devices():
    return [_device]
""",
}


def write_package(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def package_path(root):
    return os.pathsep.join([BOOT_DIR, PACKAGE_DIR, str(root)])


def test_cupy_arrays_are_recorded_with_the_line_that_made_them(run_traced, tmp_path):
    stand_ins = tmp_path / "site-packages"  # where CuPy and JAX are installed
    write_package(stand_ins, STAND_IN_CUPY)
    run = run_traced(
        """
import cupy

kept = []
for step in range(6):
    scratch = cupy.empty(3000)
    kept.append(cupy.empty(1 << 16))  # the kept line
    del scratch
leave_traced_program()
""",
        {"PYTHONPATH": package_path(stand_ins)},
    )
    assert run.returncode == 0, run.stderr
    assert run.gpuleak_lines() == []
    records = run.records()
    names = {r["id"]: r["name"] for r in records if r["type"] == "api_name"}
    allocs = [r for r in records if r["type"] == "alloc" and names.get(r["api"]) == "cupy.memory_pool.malloc"]
    frees = [r for r in records if r["type"] == "free" and names.get(r["api"]) == "cupy.memory_pool.free"]
    assert sorted(a["size"] for a in allocs) == [3072] * 6 + [65536] * 6
    assert len(frees) == 6, "each scratch block went back to the pool"
    tracking = run.annotations("framework_tracking")
    assert tracking and tracking[-1]["framework"] == "CuPy"
    assert tracking[-1]["hidden_allocations"] is False

    # The report names the program's line, not the hook's or the pool's.
    report = subprocess.run(
        [os.path.join(build_dir(), "gpuleak"), "report", "--json", run.trace_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    process = json.loads(report.stdout)["processes"][0]
    groups = process["leaks"]["groups"]
    kept_line = next(i for i, line in enumerate(open(tmp_path / "program.py"), 1) if "# the kept line" in line)
    assert any(g["site"]["line"] == kept_line and g["allocations"] == 6 for g in groups), groups
    assert process["framework_tracking"]["framework"] == "CuPy"


def test_cupy_arrays_kept_in_a_list_get_their_holder_without_torch(run_traced, tmp_path):
    # A CuPy loop marks no step in the process and imports no torch: the
    # holder request from `gpuleak run` is answered between its iterations,
    # by the walk over CuPy's arrays.
    stand_ins = tmp_path / "site-packages"
    write_package(stand_ins, STAND_IN_CUPY)
    run = run_traced(
        """
import json, os, sys, time
import cupy

request_path = os.path.join(os.environ["GPULEAK_TRACE_DIR"], "gpuleak-%d.holder-request.json" % os.getpid())
spectra = []
started = None
for step in range(100000):
    power = cupy.empty(1 << 12)
    spectra.append(power)  # the kept line
    if step == 6:
        request = {"request_id": 5, "sites": [{"site_id": 2, "addresses": [[a.data.ptr, a.nbytes] for a in spectra]}]}
        with open(request_path + ".partial", "w") as f:
            f.write(json.dumps(request))
        os.replace(request_path + ".partial", request_path)
        started = time.monotonic()
    if started is not None and (not os.path.exists(request_path) or time.monotonic() - started > 20):
        break
    time.sleep(0.01)
time.sleep(0.3)
print("torch imported:", "torch" in sys.modules)
leave_traced_program()
""",
        {"PYTHONPATH": package_path(stand_ins), "GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_HOLDER_IDLE_MS": "300"},
    )
    assert run.returncode == 0, run.stderr
    assert "torch imported: False" in run.stdout
    (answer,) = run.annotations("holder")
    (site,) = answer["sites"]
    assert site["kind"] == "tensor" and site["matched_addresses"] == 7, site
    assert site["holder"]["name"] == "spectra" and site["holder"]["owner"] == "module __main__"
    assert site["holder"]["kept_at"]["statement"].startswith("spectra.append(power)")
    # CuPy's words for a host copy, not torch's.
    assert site["cause"] == "tensor-container" and "x.get()" in site["fix"], site["fix"]


SHORT_CUPY_LOOP = """
import sys, time
import cupy

spectra = []
started = time.monotonic()
while time.monotonic() - started < {seconds}:
    power = cupy.empty(1 << 12)
    {keep}
    time.sleep(0.002)
print("torch imported:", "torch" in sys.modules)
leave_traced_program()
"""


def test_a_short_cupy_loop_gets_its_holder_before_it_ends(run_traced, tmp_path):
    # A CuPy loop that lasts one second marks no step and ends before any
    # request of `gpuleak run` could reach it: the watcher's growth boundaries
    # find the growing site in the process and the holder is walked at once.
    stand_ins = tmp_path / "site-packages"
    write_package(stand_ins, STAND_IN_CUPY)
    program = SHORT_CUPY_LOOP.replace("{seconds}", "1.0").replace("{keep}", "spectra.append(power)  # the kept line")
    run = run_traced(program, {"PYTHONPATH": package_path(stand_ins), "GPULEAK_HOLDER_REQUESTS": "1"})
    assert run.returncode == 0, run.stderr
    assert "torch imported: False" in run.stdout
    answers = run.annotations("holder")
    assert answers, run.stderr
    assert str(answers[0]["request_id"]).startswith("in-process")
    (site,) = answers[0]["sites"]
    assert site["kind"] == "tensor" and site["matched_addresses"] >= 8, site
    assert site["holder"]["name"] == "spectra" and site["holder"]["owner"] == "module __main__"
    assert site["holder"]["kept_at"]["statement"].startswith("spectra.append(power)")
    assert run.steps() == []  # the boundaries are not steps: nothing of them is in the trace


def test_a_short_cupy_loop_that_keeps_nothing_walks_for_no_holder(run_traced, tmp_path):
    stand_ins = tmp_path / "site-packages"
    write_package(stand_ins, STAND_IN_CUPY)
    program = SHORT_CUPY_LOOP.replace("{seconds}", "1.0").replace("{keep}", "del power")
    run = run_traced(program, {"PYTHONPATH": package_path(stand_ins), "GPULEAK_HOLDER_REQUESTS": "1"})
    assert run.returncode == 0, run.stderr
    assert run.annotations("holder") == []


def test_jax_preallocation_is_said_with_the_settings_that_show_arrays(run_traced, tmp_path):
    stand_ins = tmp_path / "site-packages"  # where CuPy and JAX are installed
    write_package(stand_ins, STAND_IN_JAX)
    run = run_traced(
        """
import time
import jax
time.sleep(0.3)
leave_traced_program()
""",
        {"PYTHONPATH": package_path(stand_ins), "GPULEAK_DEVICE_SAMPLE_MS": "20"},
    )
    assert run.returncode == 0, run.stderr
    tracking = run.annotations("framework_tracking")
    assert tracking == [
        {
            "framework": "JAX",
            "mode": "preallocated-pool",
            "hidden_allocations": True,
            "device_memory_holds_arrays": False,
            "how_to_see": "XLA_PYTHON_CLIENT_PREALLOCATE=false " "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
        }
    ]
    used = [r for r in run.records() if r["type"] == "sample" and r["metric"] == 5]
    assert len(used) >= 3, "the pool's bytes in use are sampled"
    assert [u["value"] for u in used] == sorted(u["value"] for u in used)

    report = subprocess.run(
        [os.path.join(build_dir(), "gpuleak"), "report", run.trace_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "JAX allocates from a pool it reserved at start" in report.stdout + report.stderr
    assert "XLA_PYTHON_CLIENT_ALLOCATOR=platform" in report.stdout + report.stderr


def test_jax_set_up_before_recording_starts_is_still_said(run_traced, tmp_path):
    # As on a GPU: `import jax` runs before the program's first CUDA call
    # starts the recorder, so the framework annotation is made while nothing
    # records. It waits and is written with the first pool sample after the
    # start (the H200 traces of JAX programs had none before).
    stand_ins = tmp_path / "site-packages"
    write_package(stand_ins, STAND_IN_JAX)
    run = run_traced(
        """
import ctypes, os, sys, time
collector = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
import jax
assert collector.gpuleak_is_recording() == 0
assert collector.gpuleak_start_recording() == 1  # the first CUDA call, later
time.sleep(0.3)
sys.stdout.flush()
collector.gpuleak_flush()
os._exit(0)
""",
        {"PYTHONPATH": package_path(stand_ins), "GPULEAK_DEVICE_SAMPLE_MS": "20"},
        prelude=False,
    )
    assert run.returncode == 0, run.stderr
    tracking = run.annotations("framework_tracking")
    assert [t["mode"] for t in tracking] == ["preallocated-pool"]
    records = run.records()
    first_sample = next(i for i, r in enumerate(records) if r["type"] == "sample" and r["metric"] == 5)
    annotated = next(i for i, r in enumerate(records) if r["type"] == "annotation" and r["key"] == "framework_tracking")
    assert annotated < first_sample


def test_cupy_set_up_before_recording_starts_is_said_with_its_first_array(run_traced, tmp_path):
    # `import cupy` comes before the first CUDA call; CuPy records no samples,
    # so the waiting framework annotation goes out with its first array.
    stand_ins = tmp_path / "site-packages"
    write_package(stand_ins, STAND_IN_CUPY)
    run = run_traced(
        """
import ctypes, os, sys
collector = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
import cupy
assert collector.gpuleak_start_recording() == 1
kept = [cupy.empty(4096) for _ in range(3)]
sys.stdout.flush()
collector.gpuleak_flush()
os._exit(0)
""",
        {"PYTHONPATH": package_path(stand_ins)},
        prelude=False,
    )
    assert run.returncode == 0, run.stderr
    assert [t["framework"] for t in run.annotations("framework_tracking")] == ["CuPy"]


def test_jax_platform_allocator_hides_nothing(run_traced, tmp_path):
    stand_ins = tmp_path / "site-packages"  # where CuPy and JAX are installed
    write_package(stand_ins, STAND_IN_JAX)
    run = run_traced(
        """
import jax
leave_traced_program()
""",
        {
            "PYTHONPATH": package_path(stand_ins),
            "XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
            "GPULEAK_DEVICE_SAMPLE_MS": "0",
        },
    )
    assert run.returncode == 0, run.stderr
    assert run.annotations("framework_tracking") == [
        {"framework": "JAX", "mode": "platform", "hidden_allocations": False, "device_memory_holds_arrays": True}
    ]


def test_jax_allocator_modes_follow_its_documented_settings():
    from gpuleak import jax_arrays

    assert jax_arrays.allocator_mode({}) == ("preallocated-pool", True)
    assert jax_arrays.allocator_mode({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}) == ("pool-on-demand", True)
    assert jax_arrays.allocator_mode(
        {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}
    ) == ("platform", False)
    assert jax_arrays.tracking_annotation({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"})["mem_fraction"] == ".5"


def test_a_failing_hook_says_so_once_and_the_program_goes_on(run_traced, tmp_path):
    stand_ins = tmp_path / "site-packages"  # where CuPy and JAX are installed
    files = dict(STAND_IN_CUPY)
    files[
        "cupy/cuda/__init__.py"
    ] += """
_malloc = Pool.malloc
def malloc_without_mem_ptr(self, size):
    for hook in memory_hook.hooks():
        hook.malloc_postprocess(device_id=0, size=size)
    return 0
Pool.malloc = malloc_without_mem_ptr
"""
    write_package(stand_ins, files)
    run = run_traced(
        """
import cupy
arrays = [cupy.empty(100) for _ in range(3)]
print("still running")
leave_traced_program()
""",
        {"PYTHONPATH": package_path(stand_ins)},
    )
    assert run.returncode == 0, run.stderr
    assert "still running" in run.stdout
    assert len([l for l in run.gpuleak_lines() if "CuPy array tracking failed" in l]) == 1
