"""The main script's loop as a step source (python_loop.py).

CI runs Python 3.11, which has no sys.monitoring: there the module must
import, say in the trace why it cannot follow the loop, and let the program
run. The choice of the loop is pure (LoopChooser, fed synthetic back-edges
with their times), and the sys.monitoring side is driven here through a
stand-in of sys.monitoring with real code objects. Where a Python 3.12 or
later is found (GPULEAK_TEST_PYTHON312, or python3.12/python3.13 on PATH; the
GPU machine's python3 is 3.12), a traced child runs a loop against a JAX
stand-in end to end: python-loop steps, the pool read at each, and the
report's LEAK / NO LEAK.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

from conftest import PACKAGE_DIR, build_dir
from gpuleak import _collector, python_loop
from gpuleak._steps import StepClock
from gpuleak.jax_arrays import PoolReader
from gpuleak.python_loop import DISABLE, IGNORE, MARK, LoopChooser

US = 1_000
MS = 1_000_000


def feed(chooser, events, depths):
    """[(key, time_ns)] -> [(key, action, clock, step)]; depths: key -> loop depth, or the
    keys of the loops it stands in (outermost first, itself last)."""

    def enclosing_of(key):
        nest = depths[key]
        # A bare depth: loops of its own around it, none of them another key here.
        return nest if isinstance(nest, tuple) else tuple(("around", key, i) for i in range(nest - 1)) + (key,)

    out = []
    for key, now in events:
        action = chooser.on_back_edge(key, now, enclosing_of)
        out.append((key, action, chooser.clock if action == MARK else None, chooser.step if action == MARK else None))
    return out


# ---- which loop is chosen ----------------------------------------------------------


def test_a_single_loop_is_marked_every_time_round_from_its_eighth():
    chooser = LoopChooser()
    out = feed(chooser, [("step", i * 500 * US) for i in range(1, 201)], {"step": 1})
    assert [a for _, a, _, _ in out[:7]] == [IGNORE] * 7
    assert all(a == MARK for _, a, _, _ in out[7:])
    assert {c for _, _, c, _ in out[7:]} == {1}
    assert [s for _, _, _, s in out[7:]] == list(range(8, 201))  # its own count of iterations


def test_a_tight_loop_is_never_chosen_and_is_disabled_after_one_block():
    chooser = LoopChooser()
    out = feed(chooser, [("tight", i * US) for i in range(1, 300)], {"tight": 1})
    actions = [a for _, a, _, _ in out]
    assert MARK not in actions
    assert actions[:255] == [IGNORE] * 255 and chooser.disabled == 1
    # Disabled at its 256th pass; a second back-edge of the same loop
    # (an if/else body) is disabled where it fires too.
    assert actions[255:] == [DISABLE] * (len(actions) - 255)


def test_bursts_of_a_tight_inner_loop_are_not_chosen_while_the_step_loop_is():
    # for step in ...: for x in range(100): ... (1 us each), 10 ms a step.
    events, now = [], 0
    for _ in range(30):
        for _ in range(100):
            now += US
            events.append(("inner", now))
        now += 10 * MS
        events.append(("step", now))
    chooser = LoopChooser()
    out = feed(chooser, events, {"step": 1, "inner": 2})
    assert not [o for o in out if o[0] == "inner" and o[1] == MARK]
    assert [o for o in out if o[0] == "inner" and o[1] == DISABLE]
    steps = [o for o in out if o[0] == "step"]
    assert all(a == MARK for _, a, _, _ in steps[7:])


def test_the_loop_around_a_chosen_inner_loop_takes_over_as_a_new_clock():
    # for step in ...: for layer in 12 layers: ... -- the layer loop goes
    # round 8 times first; the step loop takes over once it has.
    events, now = [], 0
    for _ in range(40):
        for _ in range(12):
            now += 500 * US
            events.append(("layer", now))
        now += 2 * MS
        events.append(("step", now))
    chooser = LoopChooser()
    out = feed(chooser, events, {"step": 1, "layer": 2})
    marked_layers = [o for o in out if o[0] == "layer" and o[1] == MARK]
    assert marked_layers and {c for _, _, c, _ in marked_layers} == {1}
    steps = [o for o in out if o[0] == "step"]
    assert [a for _, a, _, _ in steps[7:]] == [MARK] * 33
    assert {c for _, _, c, _ in steps[7:]} == {2}
    # Once the step loop is chosen the layer loop marks nothing more.
    first_step_mark = out.index(steps[7])
    assert not [o for o in out[first_step_mark:] if o[0] == "layer" and o[1] == MARK]


def described_clocks(events, nesting):
    """{clock: (key, the clocks it encloses)} at each clock's first mark; nesting: key -> the
    keys of the loops it stands in (enclosing_of)."""
    chooser = LoopChooser()
    described = {}
    for key, now in events:
        if chooser.on_back_edge(key, now, lambda k: nesting[k]) == MARK and chooser.new_clock:
            described[chooser.clock] = (key, list(chooser.encloses))
    return described


def test_the_loop_around_a_chosen_inner_loop_says_it_encloses_that_clock():
    # serve(): while True: batch -> forward(): for length in lengths -- the
    # per-request loop (inside forward, called from the serving loop) goes
    # round 8 times first; the serving loop's new clock encloses its clock.
    events, now = [], 0
    for batch in range(40):
        for _ in range(1 + batch % 9):
            now += 300 * US
            events.append(("request", now))
        now += MS
        events.append(("serve", now))
    nesting = {"serve": ("serve",), "request": ("serve", "request")}
    assert described_clocks(events, nesting) == {1: ("request", []), 2: ("serve", [1])}


def test_loops_one_after_another_enclose_nothing():
    events, now = [], 0
    for key in ("train", "eval", "train"):
        for _ in range(50):
            now += MS
            events.append((key, now))
    nesting = {"train": ("epoch", "train"), "eval": ("epoch", "eval")}
    assert described_clocks(events, nesting) == {1: ("train", []), 2: ("eval", [])}


def test_an_epoch_loop_that_goes_round_three_times_leaves_the_batches_chosen():
    events, now = [], 0
    for _ in range(3):
        for _ in range(100):
            now += MS
            events.append(("batch", now))
        now += MS
        events.append(("epoch", now))
    chooser = LoopChooser()
    out = feed(chooser, events, {"epoch": 1, "batch": 2})
    assert not [o for o in out if o[0] == "epoch" and o[1] == MARK]
    batches = [o for o in out if o[0] == "batch"]
    assert all(a == MARK for _, a, _, _ in batches[7:])


def test_loops_one_after_another_take_turns_and_keep_their_clocks():
    # train loop, evaluation loop, train loop again: the same depth.
    events, now = [], 0
    for key in ("train", "eval", "train"):
        for _ in range(50):
            now += MS
            events.append((key, now))
    chooser = LoopChooser()
    out = feed(chooser, events, {"train": 1, "eval": 1})
    eval_marks = [o for o in out[50:100] if o[1] == MARK]
    assert len(eval_marks) == 43 and {c for _, _, c, _ in eval_marks} == {2}
    again = out[100:]
    assert all(a == MARK for _, a, _, _ in again)
    assert {c for _, _, c, _ in again} == {1}  # the train loop's clock again


def test_a_deeper_loop_takes_over_only_once_the_chosen_one_stopped():
    events, now = [], 0
    for _ in range(20):
        now += MS
        events.append(("outer", now))
    for _ in range(30):  # a loop inside a function called after the outer loop ended
        now += MS
        events.append(("helper", now))
    chooser = LoopChooser()
    out = feed(chooser, events, {"outer": 1, "helper": 2})
    helper = [a for k, a, _, _ in out if k == "helper"]
    # The outer loop must be idle for ten of its iterations (10 ms) first.
    assert helper[:10] == [IGNORE] * 10
    assert helper[10:] == [MARK] * 20


def test_at_most_max_loops_are_followed():
    chooser = LoopChooser(max_loops=4)
    out = feed(chooser, [("loop%d" % i, i * MS) for i in range(6)], {})
    assert [a for _, a, _, _ in out] == [IGNORE] * 4 + [DISABLE] * 2


# ---- the loops of code objects --------------------------------------------------------

SCRIPT = """
def main(steps):
    total = 0
    for step in range(steps):
        if step % 2:
            total += 1
        else:
            total += 2
        for inner in range(3):
            total += inner
    return total

class Trainer:
    def fit(self):
        while self.more():
            pass

main(3)
"""


def code_named(code, name):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = code_named(const, name)
            if found is not None:
                return found
    return None


def test_loop_ranges_merge_the_back_edges_of_one_loop_and_nest_the_inner_one():
    module = compile(SCRIPT, "/work/train.py", "exec")
    main = code_named(module, "main")
    ranges = python_loop.loop_ranges(main)
    assert len(ranges) == 2, ranges
    (outer_first, outer_last), (inner_first, inner_last) = ranges
    assert outer_first < inner_first <= inner_last < outer_last
    assert python_loop.line_of(main, outer_first) == 4  # `for step in range(steps):`
    assert python_loop.line_of(main, inner_first) == 9
    assert len(python_loop.loop_ranges(code_named(module, "fit"))) == 1


def test_enclosing_loops_are_the_main_scripts_loops_up_the_stack_only():
    module = compile(SCRIPT, "/work/train.py", "exec")
    main = code_named(module, "main")
    (outer_first, outer_last), (inner_first, _) = python_loop.loop_ranges(main)
    library = compile("def call(f):\n    for _ in [0]:\n        f()\n", "/lib/lib.py", "exec")

    def frame(code, at, back=None):
        return types.SimpleNamespace(f_code=code, f_lasti=at, f_back=back)

    ranges = {main: python_loop.loop_ranges(main)}
    ranges_of = ranges.get
    outer = frame(main, outer_first)
    inner = frame(main, inner_first)
    assert python_loop.enclosing_loops(outer, ranges_of) == ((main, outer_first),)
    assert python_loop.enclosing_loops(inner, ranges_of) == ((main, outer_first), (main, inner_first))
    # A library frame (its own loop) between two main-script frames counts nothing.
    called = frame(main, inner_first, back=frame(library, 4, back=frame(main, outer_first)))
    assert python_loop.enclosing_loops(called, ranges_of) == (
        (main, outer_first),
        (main, outer_first),
        (main, inner_first),
    )
    assert python_loop.enclosing_loops(None, ranges_of) == ()


# ---- availability ------------------------------------------------------------------------


def test_python_before_3_12_is_said_in_words():
    reason = python_loop.unavailable_reason((3, 11, 2), {})
    assert reason == (
        "Python 3.11 has no sys.monitoring; following the main script's loop " "needs Python 3.12 or later"
    )
    assert python_loop.unavailable_reason((3, 12, 1), {}, monitoring=object()) is None
    assert (
        python_loop.unavailable_reason((3, 13, 0), {"GPULEAK_PYTHON_LOOP": "0"}, monitoring=object())
        == "turned off by GPULEAK_PYTHON_LOOP=0"
    )


class Annotations:
    def __init__(self):
        self.made = []

    def annotate(self, key, value):
        self.made.append((key, json.loads(value)))


def test_install_on_an_old_python_annotates_why_and_returns_nothing(monkeypatch):
    monkeypatch.setattr(python_loop, "_signal", None)
    collector = Annotations()
    assert python_loop.install(collector, environ={}, version_info=(3, 11, 2)) is None
    assert collector.made == [
        (
            "python_loop",
            {
                "available": False,
                "reason": "Python 3.11 has no sys.monitoring; following the main script's loop needs "
                "Python 3.12 or later",
            },
        )
    ]


# ---- the sys.monitoring side, through a stand-in ---------------------------------------


class StandInMonitoring:
    """The part of sys.monitoring python_loop.py uses, recording what it was asked."""

    DISABLE = object()
    events = types.SimpleNamespace(PY_START=1, JUMP=64)

    def __init__(self, taken=()):
        self.tools = {t: "other" for t in taken}
        self.callbacks, self.global_events, self.local_events = {}, {}, {}

    def get_tool(self, tool):
        return self.tools.get(tool)

    def use_tool_id(self, tool, name):
        self.tools[tool] = name

    def register_callback(self, tool, event, callback):
        self.callbacks[(tool, event)] = callback

    def set_events(self, tool, events):
        self.global_events[tool] = events

    def set_local_events(self, tool, code, events):
        self.local_events[code] = events


def start_main(signal, module):
    """Calls the PY_START callback the way the script's module code start would."""
    namespace = {"__name__": "__main__", "signal": signal, "code": module}
    exec(compile("result = signal.on_start(code, 0)", "<start>", "exec"), namespace)
    return namespace["result"]


def test_the_main_scripts_code_objects_alone_get_jump_events():
    monitoring, collector, marks = StandInMonitoring(taken=(4,)), Annotations(), []
    signal = python_loop.LoopSignal(monitoring, collector, marks.append)
    assert signal.start() is None
    assert signal.tool == 3  # 4 was taken
    assert monitoring.global_events[3] == monitoring.events.PY_START
    library = compile("def f():\n    pass\n", "/lib/x.py", "exec")
    # Another module's code starting first: disabled where it fired.
    assert signal.on_start(library, 0) is monitoring.DISABLE
    assert signal.main_file is None
    module = compile(SCRIPT, "/work/train.py", "exec")
    assert start_main(signal, module) is monitoring.DISABLE
    assert signal.main_file == "/work/train.py"
    assert monitoring.global_events[3] == 0  # no more PY_START
    followed = set(monitoring.local_events)
    names = {c.co_name for c in followed}
    assert {"<module>", "main", "Trainer", "fit"} <= names
    assert all(c.co_filename == "/work/train.py" for c in followed)
    assert all(v == monitoring.events.JUMP for v in monitoring.local_events.values())
    assert collector.made[-1][0] == "python_loop" and collector.made[-1][1]["available"] is True


def follow_main_with_a_clock(signal):
    """Starts the signal on SCRIPT's main() with a clock that moves 1 ms per reading;
    returns main's code and its loop's first and last offsets."""
    signal.start()
    module = compile(SCRIPT, "/work/train.py", "exec")
    start_main(signal, module)
    main = code_named(module, "main")
    (first, last), _ = python_loop.loop_ranges(main)
    now = [0]

    def clock_ns():
        now[0] += MS
        return now[0]

    signal._clock_ns = clock_ns
    return main, first, last


def test_back_edges_of_the_followed_loop_mark_steps_with_its_place_described():
    monitoring, collector, marks = StandInMonitoring(), Annotations(), []
    signal = python_loop.LoopSignal(monitoring, collector, marks.append)
    main, first, last = follow_main_with_a_clock(signal)
    assert signal.on_jump(main, first, last + 10) is monitoring.DISABLE  # forward
    for _ in range(20):
        assert signal.on_jump(main, last, first) is None
    assert marks == [1] * 13
    described = [v for k, v in collector.made if k == "iteration_clock"]
    assert described == [
        {
            "source": _collector.STEP_FROM_PYTHON_LOOP,
            "clock": 1,
            "description": "iterations of the loop in main (train.py:4)",
            "file": "/work/train.py",
            "line": 4,
            "function": "main",
        }
    ]


def test_a_failure_inside_the_callback_turns_the_signal_off_once_and_the_program_runs_on(capsys):
    def broken_mark(clock):
        raise RuntimeError("no room")

    monitoring, collector = StandInMonitoring(), Annotations()
    signal = python_loop.LoopSignal(monitoring, collector, broken_mark)
    main, first, last = follow_main_with_a_clock(signal)
    results = [signal.on_jump(main, last, first) for _ in range(12)]
    assert results[7] is monitoring.DISABLE and not signal.on
    assert all(v == 0 for v in monitoring.local_events.values())
    assert monitoring.global_events[signal.tool] == 0
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("gpuleak:")]
    assert len(errors) == 1 and "no room" in errors[0] and "program runs on" in errors[0]
    assert collector.made[-1] == ("python_loop", {"available": False, "reason": "turned off after an error: no room"})


# ---- the step clock and the pool ------------------------------------------------------


class Marks:
    def __init__(self):
        self.calls = []

    def mark_clock_step(self, step, source, clock, pacing):
        self.calls.append(("mark", step, source, clock, pacing))


def test_python_loop_steps_pace_only_where_no_program_clock_marked_one_and_read_the_pool_first():
    collector = Marks()
    clock = StepClock(collector)
    clock.pool_reader = types.SimpleNamespace(on_step=lambda: collector.calls.append(("pool",)))
    clock.python_loop_pass(1)
    assert collector.calls == [("pool",), ("mark", 1, _collector.STEP_FROM_PYTHON_LOOP, 1, 1)]
    collector.calls.clear()
    clock.explicit_step()
    clock.python_loop_pass(1)
    assert collector.calls[-1] == ("mark", 2, _collector.STEP_FROM_PYTHON_LOOP, 1, 0)
    assert collector.calls.count(("pool",)) == 1  # the explicit step's, not the loop's


class FakeArray:
    def __init__(self, pointer, nbytes=1 << 20):
        self.pointer, self.nbytes = pointer, nbytes

    def unsafe_buffer_pointer(self):
        return self.pointer


class PoolStandIn:
    """A device whose bytes in use are its live arrays', and jax.live_arrays()."""

    platform, id = "gpu", 0

    def __init__(self):
        self.arrays = [FakeArray(0x1000)]  # the parameters

    def memory_stats(self):
        return {"bytes_in_use": sum(a.nbytes for a in self.arrays)}


def test_the_pool_reader_asks_once_for_the_holder_of_the_arrays_that_filled_the_pool():
    device = PoolStandIn()
    fake_jax = types.SimpleNamespace(devices=lambda: [device], live_arrays=lambda: list(device.arrays))
    asked = []
    requests = types.SimpleNamespace(answer_candidates=asked.append)
    collector = types.SimpleNamespace(record_sample=lambda *a: None)
    reader = PoolReader(fake_jax, collector, interval_s=0, requests=lambda: requests)
    for step in range(1, 40):
        device.arrays[0] = FakeArray(0x1000 + step)  # new parameters each step, the old freed
        device.arrays.append(FakeArray(0x100000 * step))  # and the step's weights kept
        reader.on_step()
    assert len(asked) == 1
    [(site_id, ranges)] = asked[0]
    assert site_id == 0xFFFFFFFF
    kept = {0x100000 * step for step in range(1, 40)}
    # Only arrays that appeared between the 4th and the 8th rise: the kept
    # weights of those steps and the latest parameters.
    assert 4 <= len(ranges) <= 6 and sum(r[0] in kept for r in ranges) >= len(ranges) - 1
    assert all(r[1] == 1 << 20 for r in ranges)


def test_a_flat_pool_asks_for_no_holder():
    device = PoolStandIn()
    fake_jax = types.SimpleNamespace(devices=lambda: [device], live_arrays=lambda: list(device.arrays))
    asked = []
    requests = types.SimpleNamespace(answer_candidates=asked.append)
    reader = PoolReader(
        fake_jax, types.SimpleNamespace(record_sample=lambda *a: None), interval_s=0, requests=lambda: requests
    )
    for step in range(1, 100):
        device.arrays[0] = FakeArray(0x1000 + step)
        reader.on_step()
    assert asked == []


def test_the_pool_reader_reads_at_most_once_per_interval():
    class Device:
        platform, id = "gpu", 0

        def memory_stats(self):
            return {"bytes_in_use": 5 << 20, "bytes_limit": 64 << 30}

    samples = []
    collector = types.SimpleNamespace(record_sample=lambda *a: samples.append(a))
    fake_jax = types.SimpleNamespace(devices=lambda: [Device()])
    now = [0.0]
    reader = PoolReader(fake_jax, collector, interval_s=0.001, clock=lambda: now[0])
    for _ in range(10):
        now[0] += 0.0004
        reader.on_step()
    used = [s for s in samples if s[0] == _collector.METRIC_POOL_USED_BYTES]
    assert 3 <= len(used) <= 4 and used[0] == (_collector.METRIC_POOL_USED_BYTES, 0, 5 << 20)


# ---- a traced child -------------------------------------------------------------------

STAND_IN_JAX = '''
import weakref

class Device:
    platform, id = "gpu", 0
    def __init__(self):
        self.in_use = 8 << 20
    def memory_stats(self):
        return {"bytes_in_use": self.in_use, "bytes_limit": 64 << 30}

_device = Device()
_live = weakref.WeakSet()
_next = [0x7f0000000000]

class Array:
    """An array inside the preallocated pool: its bytes count in use while it lives."""
    def __init__(self, nbytes):
        self.nbytes, self._pointer = nbytes, _next[0]
        _next[0] += nbytes
        _device.in_use += nbytes
        _live.add(self)
    def unsafe_buffer_pointer(self):
        return self._pointer
    def __del__(self):
        _device.in_use -= self.nbytes

def devices():
    return [_device]

def live_arrays():
    return list(_live)
'''

LOOP_PROGRAM = """
import time
import jax

def main(keep):
    weight_history = []
    params = jax.Array(1 << 20)
    for step in range(200):
        started = time.perf_counter()
        while time.perf_counter() - started < 0.0005:  # a 0.5 ms jitted step
            pass
        params = jax.Array(1 << 20)  # the step's new weights; the old ones are freed
        if keep:
            weight_history.append(params)

main(KEEP)
leave_traced_program()
"""


def test_on_python_3_11_the_program_runs_and_the_trace_says_why_no_loop_is_followed(run_traced, tmp_path):
    if sys.version_info >= (3, 12):
        pytest.skip("this interpreter has sys.monitoring")
    (tmp_path / "site-packages" / "jax").mkdir(parents=True)
    (tmp_path / "site-packages" / "jax" / "__init__.py").write_text(STAND_IN_JAX)
    run = run_traced(
        LOOP_PROGRAM.replace("KEEP", "True"),
        {
            "PYTHONPATH": os.pathsep.join(
                [os.path.join(PACKAGE_DIR, "boot"), PACKAGE_DIR, str(tmp_path / "site-packages")]
            ),
            "GPULEAK_DEVICE_SAMPLE_MS": "20",
        },
    )
    assert run.returncode == 0, run.stderr
    assert run.gpuleak_lines() == []
    loop = run.annotations("python_loop")
    assert loop and loop[0]["available"] is False and "needs Python 3.12" in loop[0]["reason"]
    assert not [s for s in run.steps() if s["source"] == _collector.STEP_FROM_PYTHON_LOOP]


def python312():
    """A Python 3.12+ that runs (a pyenv shim on PATH may not), or None."""
    # pyenv's interpreters are not on PATH (only shims that may refuse to run).
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    candidates = (
        [os.environ.get("GPULEAK_TEST_PYTHON312")]
        + [shutil.which(name) for name in ("python3.12", "python3.13", "python3.14", "python3")]
        + pyenv
    )
    for candidate in candidates:
        if not candidate:
            continue
        try:
            said = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except Exception:
            continue
        if said == "True":
            return candidate
    return None


@pytest.mark.parametrize("keep,verdict", [(True, "LEAK"), (False, "NO LEAK")])
def test_on_python_3_12_a_fast_loop_in_a_preallocated_pool_gets_a_verdict(
    run_traced, tmp_path, monkeypatch, keep, verdict
):
    interpreter = python312()
    if interpreter is None:
        pytest.skip(
            "no Python 3.12 or later here (set GPULEAK_TEST_PYTHON312): the loop " "cannot be followed on this Python"
        )
    import conftest

    monkeypatch.setattr(conftest, "PYTHON", interpreter)
    (tmp_path / "site-packages" / "jax").mkdir(parents=True)
    (tmp_path / "site-packages" / "jax" / "__init__.py").write_text(STAND_IN_JAX)
    run = run_traced(
        LOOP_PROGRAM.replace("KEEP", str(keep)),
        {
            "PYTHONPATH": os.pathsep.join(
                [os.path.join(PACKAGE_DIR, "boot"), PACKAGE_DIR, str(tmp_path / "site-packages")]
            ),
            "GPULEAK_HOLDER_REQUESTS": "1",
        },
    )
    assert run.returncode == 0, run.stderr
    assert run.gpuleak_lines() == [], run.stderr
    steps = [s for s in run.steps() if s["source"] == _collector.STEP_FROM_PYTHON_LOOP]
    assert len(steps) >= 150, len(steps)
    described = run.annotations("iteration_clock")
    script = (tmp_path / "program.py").read_text().splitlines()
    loop_line = next(n for n, line in enumerate(script, 1) if "for step in range(200)" in line)
    assert described and described[0]["function"] == "main" and described[0]["line"] == loop_line
    report = subprocess.run(
        [os.path.join(build_dir(), "gpuleak"), "report", "--json", run.trace_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    growth = json.loads(report.stdout)["processes"][0]["growth"]
    assert growth["verdict"] == verdict, growth
    assert growth["step_source"] == "python-loop"
    if keep:
        assert abs(growth["rate_bytes_per_step"] - (1 << 20)) < (1 << 16)
        assert growth["cause"] == "tensors-kept-alive"
        assert growth["sites"][0]["site"]["function"] == "main"
        assert growth["holder"]["holder"]["name"] == "weight_history", growth["holder"]


def test_the_collector_records_python_loop_steps_as_their_own_source(run_traced):
    # A collector that knew sources 1-4 only took 6 for `explicit`, which
    # outranks optimizer steps: python-loop must stay python-loop.
    run = run_traced(
        """
import ctypes
_traced_collector.gpuleak_mark_clock_step.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_uint32,
                                                      ctypes.c_int]
for step in range(1, 4):
    _traced_collector.gpuleak_mark_clock_step(step, 6, 1, 1)
_traced_collector.gpuleak_mark_clock_step(4, 99, 0, 1)
leave_traced_program()
"""
    )
    assert run.returncode == 0, run.stderr
    assert [(s["step"], s["source"], s["clock"]) for s in run.steps()] == [
        (1, 6, 1),
        (2, 6, 1),
        (3, 6, 1),
        (4, 2, 0),
    ]  # an unknown source still counts as explicit


def test_marks_wait_for_the_collector_to_be_in_the_process_and_check_at_most_every_100_ms(monkeypatch):
    from gpuleak import _collector, _runtime

    present, checks, marked = [False], [], []
    monkeypatch.setattr(_collector, "loaded_in_process", lambda: checks.append(1) or present[0])
    monkeypatch.setattr(_runtime, "clock", lambda: types.SimpleNamespace(python_loop_pass=marked.append))
    now = [0.0]
    marks = python_loop.StepMarks(clock=lambda: now[0])
    for _ in range(50):  # 50 iterations of 1 ms, no collector: one check
        now[0] += 0.001
        marks(1)
    assert len(checks) == 1 and marked == []
    now[0] += 0.2
    present[0] = True
    for _ in range(3):
        marks(1)
    assert marked == [1, 1, 1] and len(checks) == 2
