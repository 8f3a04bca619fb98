"""gpuleak.track(): a block of code tracked from inside the program, in real child processes
with the collector built here; stand-in tensors (tracking/stand_in_tensors.py) go through the
allocator hook's entry points."""
import json
import os
import sys
import subprocess
import textwrap

import pytest

from conftest import PACKAGE_DIR, PYTHON, build_dir

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def run_program(tmp_path):
    cli = os.path.join(build_dir(), "gpuleak")
    collector = os.path.join(build_dir(), "libgpuleak_collector.so")
    if not (os.path.exists(cli) and os.path.exists(collector)):
        pytest.skip("no gpuleak and collector in %s (GPULEAK_BUILD_DIR)" % build_dir())

    def run(program, env_changes=None):
        script = tmp_path / "program.py"
        script.write_text(textwrap.dedent(program))
        env = dict(os.environ)
        for name in ("GPULEAK_COLLECTOR", "GPULEAK_TRACE_DIR", "GPULEAK_TORCH_MODE", "GPULEAK_HOLDER_REQUESTS"):
            env.pop(name, None)
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([PACKAGE_DIR, os.path.join(HERE, "tracking")]),
                "GPULEAK_BINARY": cli,
                "GPULEAK_COLLECTOR": collector,
                "GPULEAK_CACHE_DIR": str(tmp_path / "cache"),
            }
        )
        env.update(env_changes or {})
        env = {k: v for k, v in env.items() if v is not None}
        done = subprocess.run(
            [PYTHON, str(script)],
            cwd=str(tmp_path),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
        results = [
            json.loads(line[len("RESULT ") :]) for line in done.stdout.splitlines() if line.startswith("RESULT ")
        ]
        return done, results

    return run


PRELUDE = """
import json, gpuleak
from stand_in_tensors import gpu_tensor

def show(block):
    r = block.result
    print("RESULT " + json.dumps({
        "verdict": r.verdict, "left": r.left_behind_bytes, "peak": r.peak_bytes,
        "steps": r.steps, "leak": r.leak, "per_step": r.growth_bytes_per_step,
        "holder": r.holder, "kept": r.keeping_line, "sites": [s.label for s in r.left_behind],
        "growing": [s.label for s in r.growing_sites], "complete": r.complete,
        "summary": r.summary()}))
"""


def line_of(program, text):
    return next(n for n, line in enumerate(program.splitlines(), 1) if text in line)


def test_a_block_that_keeps_tensors_in_a_list_names_the_list_and_the_append(run_program):
    program = (
        PRELUDE
        + """
cache = []
def keep_some():
    for _ in range(4):
        cache.append(gpu_tensor(1 << 18))   # the keeping line
        scratch = gpu_tensor(1 << 16)
with gpuleak.track("keeps") as block:
    keep_some()
show(block)
"""
    )
    done, results = run_program(program)
    assert done.returncode == 0, done.stderr
    [r] = results
    assert r["verdict"] == "left behind"
    assert r["left"] == 4 << 20
    assert r["sites"] == ["stand_in_tensors.py:24"], r
    assert r["holder"] == "list `cache` (module __main__)"
    keeping = line_of(program, "# the keeping line")
    assert r["kept"].endswith("program.py:%d  cache.append(gpu_tensor(1 << 18))   # the keeping " "line" % keeping), r
    assert r["complete"] is True
    assert "left 4.0 MiB allocated at its end" in r["summary"]


def test_a_block_that_frees_what_it_allocates_is_clean_and_reports_its_peak(run_program):
    done, results = run_program(
        PRELUDE
        + """
kept_before = gpu_tensor(1 << 20)       # outside the block: not its memory
with gpuleak.track() as block:
    a = gpu_tensor(1 << 18)
    b = gpu_tensor(1 << 18)
    del a, b
    del kept_before                       # freed inside: not the block's either
show(block)
"""
    )
    assert done.returncode == 0, done.stderr
    [r] = results
    assert r["verdict"] == "clean", r
    assert r["left"] == 0
    assert r["peak"] == 2 << 20


def test_growth_over_the_steps_inside_a_block_is_a_leak_with_its_holder(run_program):
    done, results = run_program(
        PRELUDE
        + """
history = []
with gpuleak.track("loop") as block:
    for step in range(20):
        history.append(gpu_tensor(1 << 14))
        gpuleak.step()
show(block)
"""
    )
    assert done.returncode == 0, done.stderr
    [r] = results
    assert r["verdict"] == "leak", r
    assert r["steps"] == 20
    assert r["per_step"] == 1 << 16
    assert r["holder"] == "list `history` (module __main__)"
    assert "history.append" in r["kept"]


def test_a_sum_returned_from_the_block_names_the_statement_that_grows_it(run_program):
    # The in-process GPU suite's shape: the sum of every step's loss tensor is returned into a
    # variable; the holder walk at the block's end sees only that variable, and the line to
    # change is `total_loss += loss` in the function that returned it.
    program = (
        PRELUDE
        + """
import torch
weight = torch.ones(1, requires_grad=True)
def evaluate(steps):
    total_loss = 0
    for _ in range(steps):
        loss = (gpu_tensor(1 << 16) * weight).mean()
        total_loss += loss   # the keeping line
    return total_loss
with gpuleak.track("sums") as block:
    kept = evaluate(4)   # the caller
show(block)
"""
    )
    done, results = run_program(program)
    assert done.returncode == 0, done.stderr
    [r] = results
    assert r["verdict"] == "left behind", r
    assert r["left"] == 4 << 18, r
    assert "`kept`" in r["holder"], r
    keeping = line_of(program, "# the keeping line")
    assert r["kept"].endswith("program.py:%d  total_loss += loss   # the keeping line" % keeping), r
    assert "kept at %s" % r["kept"] in r["summary"], r


def test_blocks_nest_and_follow_each_other(run_program):
    done, results = run_program(
        PRELUDE
        + """
outer_keep, inner_keep = [], []
with gpuleak.track("outer") as outer:
    outer_keep.append(gpu_tensor(1 << 16))
    with gpuleak.track("inner") as inner:
        inner_keep.append(gpu_tensor(1 << 18))
    show(inner)
show(outer)
with gpuleak.track("after") as after:
    pass
show(after)
"""
    )
    assert done.returncode == 0, done.stderr
    inner, outer, after = results
    assert inner["left"] == 1 << 20
    assert outer["left"] == (1 << 20) + (1 << 18)
    assert after["verdict"] == "clean"


def test_blocks_on_two_threads_each_see_the_process(run_program):
    done, results = run_program(
        PRELUDE
        + """
import threading
kept = []
blocks = []
def work(n):
    with gpuleak.track("thread %d" % n) as block:
        kept.append(gpu_tensor(1 << 16))
    blocks.append(block)
threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
for t in threads: t.start()
for t in threads: t.join()
for block in blocks: show(block)
"""
    )
    assert done.returncode == 0, done.stderr
    assert len(results) == 2
    for r in results:
        assert r["verdict"] == "left behind"
        assert r["left"] >= 1 << 18


def test_start_and_stop_without_with(run_program):
    done, results = run_program(
        PRELUDE
        + """
kept = []
block = gpuleak.start("manual")
kept.append(gpu_tensor(1 << 16))
result = gpuleak.stop()
assert result is block.result
show(block)
try:
    gpuleak.stop()
except gpuleak.tracking.TrackingError as error:
    print("ERROR", error)
try:
    block.stop()
except gpuleak.tracking.TrackingError as error:
    print("ERROR", error)
"""
    )
    assert done.returncode == 0, done.stderr
    assert results[0]["left"] == 1 << 18
    errors = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert errors == [
        "ERROR gpuleak: stop() without a block started by start()",
        "ERROR gpuleak: this block was stopped already",
    ]


def test_results_before_the_end_raise_one_clear_error(run_program):
    done, _ = run_program(
        PRELUDE
        + """
with gpuleak.track() as block:
    try:
        block.verdict
    except gpuleak.tracking.TrackingError as error:
        print("ERROR", error)
"""
    )
    assert done.returncode == 0, done.stderr
    assert "ERROR gpuleak: the block has not ended yet" in done.stdout


def test_without_a_collector_it_says_so_once_and_the_code_runs(run_program, tmp_path):
    done, results = run_program(
        PRELUDE.replace("from stand_in_tensors import gpu_tensor", "")
        + """
for n in range(3):
    with gpuleak.track() as block:
        x = sum(range(1000))
    show(block)
print("RAN", x)
""",
        env_changes={"GPULEAK_COLLECTOR": str(tmp_path / "missing.so")},
    )
    assert done.returncode == 0, done.stderr
    assert "RAN 499500" in done.stdout
    assert [r["verdict"] for r in results] == ["not tracked"] * 3
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpuleak:")]
    assert len(lines) <= 2, lines  # the load failure, and that nothing is tracked: once each
    assert any("nothing is tracked" in line for line in lines), lines


def test_the_block_report_of_the_cli_is_there_as_text_and_html(run_program, tmp_path):
    done, _ = run_program(
        PRELUDE
        + """
cache = []
with gpuleak.track("for text") as block:
    cache.append(gpu_tensor(1 << 16))
print("TEXT", json.dumps(block.text()))
print("HTML", block.html("%s"))
"""
        % (tmp_path / "block.html")
    )
    assert done.returncode == 0, done.stderr
    text = json.loads(done.stdout.split("TEXT ", 1)[1].splitlines()[0])
    assert "program.py" in text or "stand_in_tensors.py" in text
    assert (tmp_path / "block.html").stat().st_size > 10000


class _StandInTorch:
    """What _release_library_caches reads of torch: torch._C's workspace call and CUDA's state."""

    def __init__(self, initialized, clear):
        self._C = type("C", (), {"_cuda_clearCublasWorkspaces": staticmethod(clear)})
        self.cuda = type("cuda", (), {"is_initialized": staticmethod(lambda: initialized)})


def test_a_block_end_gives_back_pytorchs_cublas_workspaces(monkeypatch, capsys):
    from gpuleak import tracking

    calls = []
    monkeypatch.setitem(sys.modules, "torch", _StandInTorch(True, lambda: calls.append(1)))
    tracking._release_library_caches()
    assert calls == [1]
    # Before CUDA is up there is nothing to give back, and nothing is started.
    monkeypatch.setitem(sys.modules, "torch", _StandInTorch(False, lambda: calls.append(2)))
    tracking._release_library_caches()
    assert calls == [1]

    def broken():
        raise RuntimeError("no handle pool")

    monkeypatch.setitem(sys.modules, "torch", _StandInTorch(True, broken))
    tracking._release_library_caches()  # says so once, never raises
    tracking._release_library_caches()
    said = capsys.readouterr().err
    assert said.count("could not release PyTorch's cuBLAS workspaces") == 1, said
