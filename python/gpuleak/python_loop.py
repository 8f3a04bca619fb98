"""The main script's loop as a step source (`python-loop`), through sys.monitoring.

A program that marks no steps (no gpuleak.step(), no torch optimizer, no
DataLoader) still runs its steps as a loop, most often in the script
that was started. On Python 3.12 and later, sys.monitoring (PEP 669) can
report each back-edge of chosen code objects only, so this module:

  * takes a free tool id (4, else 3: 0, 1, 2 and 5 are the debugger's,
    coverage's, the profiler's and the optimizer's by convention) and asks
    for PY_START events until the `__main__` module's code starts; each other
    code object's event is disabled where it fires, so start-up costs one
    callback per code object that runs before the script;
  * then asks for JUMP events on the code objects of the main script only:
    its module code and every function and class body compiled with it
    (co_consts, recursively), whether defined yet or not; library code is
    never instrumented;
  * counts the back-edges (a jump to a lower offset) per loop, a loop being
    (code object, destination offset): the two back-edges of a loop body
    with an if/else are one loop; forward jumps are disabled where they fire;
  * marks a step (source python-loop) at each pass of the *chosen* loop:
    one that went round `min_passes` times, the shallowest (fewest loops of
    the main script around it, counted up the stack once per loop), and
    among equally deep ones the one going round now (loops one after
    another: training, evaluation, training again); a deeper loop takes over
    only once the chosen one stopped (idle ten of its own passes' time,
    and at least 10 ms).
    Each chosen loop is a clock of its own, described once in the trace
    (`iteration_clock`, with its file, line and function): an inner loop
    chosen first and the loop around it found later are two phases, and
    the analysis judges each; the outer one's description lists the inner
    one's clock (`encloses`), so the report is about the outer one when
    both reach the same verdict (a serving loop over batches, not the
    per-request loop inside each batch);
  * bounds its cost: a loop that goes round faster than every 50 us most
    of the time (a tight inner loop, a comprehension, in bursts or not) is
    never chosen, and is disabled where it fires after 256 passes;
    at most 32 loops are followed. The chosen loop costs a callback and a
    mark per step (a few microseconds).

The analysis ranks python-loop below the program's own clocks (explicit,
optimizer-hook, dataloader) and above loops found in the allocations
(src/analysis/steps/clock_arbiter.h): where an optimizer steps, its steps win.

On Python 3.11 and earlier there is no sys.monitoring: install() writes a
`python_loop` annotation saying so, and the report says it in words when no
verdict comes. Nothing here ever raises into the program: an error turns the
signal off (said once on stderr, and in the annotation).
"""

import json
import os
import sys
import time

from gpuleak._notice import say_once

NEEDS = (3, 12)
TOOL_IDS = (4, 3)  # free by convention (sys.monitoring's DEBUGGER, COVERAGE, PROFILER, OPTIMIZER are 0, 1, 2, 5)

# What LoopChooser.on_back_edge() says about one back-edge.
IGNORE, MARK, DISABLE = 0, 1, 2


def unavailable_reason(version_info=None, environ=None, monitoring=None):
    """Why the main script's loop cannot be followed here, in words, or None."""
    version_info = sys.version_info if version_info is None else version_info
    environ = os.environ if environ is None else environ
    if str(environ.get("GPULEAK_PYTHON_LOOP", "1")).strip().lower() in ("0", "false", "no", "off"):
        return "turned off by GPULEAK_PYTHON_LOOP=0"
    if tuple(version_info[:2]) < NEEDS:
        return "Python %d.%d has no sys.monitoring; following the main script's loop needs " "Python %d.%d or later" % (
            version_info[0],
            version_info[1],
            NEEDS[0],
            NEEDS[1],
        )
    if monitoring is None:
        monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return "this Python has no sys.monitoring"
    return None


# ---- the loops of a code object, and how deep a frame stands in them -----------


def loop_ranges(code):
    """[(first, last)] byte offsets of each loop of `code`: a back-edge's target and the
    furthest back-edge to it (the body of a loop with an if/else ends in two). Any jump
    to a lower offset is a back-edge: JUMP_BACKWARD from 3.11 on, and 3.11's
    POP_JUMP_BACKWARD_IF_TRUE at the end of a `while`."""
    import dis

    furthest = {}
    for instruction in dis.get_instructions(code):
        if (
            "JUMP" in instruction.opname
            and isinstance(instruction.argval, int)
            and instruction.argval < instruction.offset
        ):
            target = instruction.argval
            furthest[target] = max(furthest.get(target, 0), instruction.offset)
    return sorted(furthest.items())


def enclosing_loops(frame, ranges_of):
    """The main script's loops the frame and its callers stand in, outermost first, each
    as (code object, first byte offset): the loop keys back-edges give (their target).

    `ranges_of(code)` gives loop_ranges() of a main-script code object, None
    for any other code (library frames between count nothing). A loop's own
    back-edge frame stands in the loop itself, so the list ends with it."""
    loops = []
    while frame is not None:
        ranges = ranges_of(frame.f_code)
        if ranges:
            at = frame.f_lasti
            # Innermost first within one frame, as callers are walked inner to outer.
            loops.extend((frame.f_code, first) for first, last in reversed(ranges) if first <= at <= last)
        frame = frame.f_back
    loops.reverse()
    return tuple(loops)


def line_of(code, offset):
    """The source line of a byte offset of `code`, or the code's first line."""
    try:
        for start, end, line in code.co_lines():
            if start <= offset < end and line is not None:
                return line
    except Exception:
        pass
    return code.co_firstlineno


# ---- which loop's passes are the steps --------------------------------------------

_TIGHT = object()  # LoopChooser.loops' entry for a loop found tight


class _Loop:
    __slots__ = ("passes", "first_ns", "last_ns", "fast", "enclosing", "clock")

    def __init__(self, now_ns):
        self.passes = 0
        self.first_ns = self.last_ns = now_ns
        self.fast = 0  # intervals shorter than tight_interval_ns in the current block
        # The loop keys it stands in (enclosing_of), itself last; known once it
        # went round min_passes times. Its depth is their number.
        self.enclosing = None
        self.clock = 0  # its clock number once it was chosen


class LoopChooser:
    """Pure: fed each back-edge (its loop key and the time), says IGNORE, MARK or DISABLE.

    `enclosing_of(key)` is asked once per loop, when it has gone round
    `min_passes` times: the keys of the main script's loops it stands in,
    outermost first and itself last (its depth is their number).
    After MARK, `clock` is the chosen loop's clock number and `step` its
    count; `new_clock` is true at the first mark of a clock, and then
    `encloses` lists the clocks of loops chosen before that stand inside
    this one (an inner loop chosen first, then the loop around it)."""

    def __init__(self, min_passes=8, tight_block=256, tight_interval_ns=50_000, max_loops=32, idle_passes=10):
        self.min_passes = min_passes
        self.tight_block = tight_block
        self.tight_interval_ns = tight_interval_ns
        self.max_loops = max_loops
        self.idle_passes = idle_passes
        self.loops = {}
        self.chosen = None  # key of the chosen loop
        self.clocks = 0  # clock numbers handed out
        self.disabled = 0  # loops disabled as too tight (or beyond max_loops)
        self.clock = 0
        self.step = 0
        self.new_clock = False
        self.encloses = []

    def on_back_edge(self, key, now_ns, enclosing_of):
        loop = self.loops.get(key)
        if loop is _TIGHT:
            return DISABLE  # another back-edge of a loop found tight (an if/else body has two)
        if loop is None:
            if len(self.loops) >= self.max_loops:
                self.disabled += 1
                return DISABLE
            loop = self.loops[key] = _Loop(now_ns)
        loop.passes += 1
        previous_ns, loop.last_ns = loop.last_ns, now_ns
        if loop.passes > 1 and now_ns - previous_ns < self.tight_interval_ns:
            loop.fast += 1
        in_block = loop.passes % self.tight_block
        if in_block == 0:
            # Most passes faster than tight_interval_ns: a tight loop (or
            # bursts of one, an inner loop) whose callbacks would cost more
            # than they tell. Disabled where it fires, for good.
            if 2 * loop.fast > self.tight_block:
                self.loops[key] = _TIGHT
                if self.chosen == key:
                    self.chosen = None
                self.disabled += 1
                return DISABLE
            loop.fast = 0
            in_block = self.tight_block
        if loop.passes < self.min_passes or 2 * loop.fast > in_block:
            return IGNORE  # not yet, or mostly tight so far
        if loop.enclosing is None:
            loop.enclosing = tuple(enclosing_of(key))
        chosen_key = self.chosen
        if chosen_key != key:
            chosen = self.loops.get(chosen_key) if chosen_key is not None else None
            if chosen is not None and not self._takes_over(loop, chosen, now_ns):
                return IGNORE
            self.chosen = key
            self.new_clock = loop.clock == 0
            if self.new_clock:
                self.clocks += 1
                loop.clock = self.clocks
                self.encloses = sorted(
                    other.clock
                    for other_key, other in self.loops.items()
                    if other is not _TIGHT and other.clock and other_key != key and key in other.enclosing
                )  # a loop with a clock knows its enclosing
        else:
            self.new_clock = False
        self.clock = loop.clock
        self.step = loop.passes
        return MARK

    def _takes_over(self, loop, chosen, now_ns):
        if len(loop.enclosing) <= len(chosen.enclosing):
            # A loop around the chosen one, or one beside it that goes round
            # now (the training loop again after an evaluation loop); two
            # that take turns each keep their own clock.
            return True
        # A deeper loop only once the chosen one has stopped: idle for ten of its passes.
        passes = max(chosen.passes - 1, 1)
        mean_ns = (chosen.last_ns - chosen.first_ns) / passes
        return now_ns - chosen.last_ns > self.idle_passes * max(mean_ns, 1_000_000)


# ---- sys.monitoring -------------------------------------------------------------------


class LoopSignal:
    """The installed signal: sys.monitoring callbacks feeding a LoopChooser and the step clock."""

    def __init__(self, monitoring, collector, mark):
        self.monitoring = monitoring
        self.events = monitoring.events
        self.collector = collector
        self.mark = mark  # mark(clock_number) at each pass of the chosen loop
        self.chooser = LoopChooser()
        self.tool = None
        self.main_file = None
        self.codes = {}  # main-script code object -> its loop_ranges (computed when asked)
        self.on = False
        self._clock_ns = time.perf_counter_ns

    # -- set-up --

    def start(self):
        monitoring = self.monitoring
        for tool in TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, "gpuleak")
                self.tool = tool
                break
        if self.tool is None:
            return "sys.monitoring's free tool ids (%s) are taken by other tools" % (
                ", ".join(str(t) for t in TOOL_IDS)
            )
        monitoring.register_callback(self.tool, self.events.PY_START, self.on_start)
        monitoring.register_callback(self.tool, self.events.JUMP, self.on_jump)
        monitoring.set_events(self.tool, self.events.PY_START)
        self.on = True
        return None

    def on_start(self, code, offset):
        """PY_START until the main script's module code starts; disabled at every other code."""
        try:
            if (
                code.co_name == "<module>"
                and self.main_file is None
                and sys._getframe(1).f_globals.get("__name__") == "__main__"
            ):
                self.main_file = code.co_filename
                self.monitoring.set_events(self.tool, 0)
                self.follow(code)
        except Exception as error:
            self.turn_off(error)
        return self.monitoring.DISABLE

    def follow(self, module_code):
        """JUMP events on the script's module code and every code object compiled with it."""
        import types

        pending = [module_code]
        while pending:
            code = pending.pop()
            if code in self.codes:
                continue
            self.codes[code] = None
            self.monitoring.set_local_events(self.tool, code, self.events.JUMP)
            pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        self.annotate(
            {"available": True, "tool_id": self.tool, "script": self.main_file, "code_objects": len(self.codes)}
        )

    # -- each back-edge --

    def on_jump(self, code, source_offset, destination_offset):
        if destination_offset >= source_offset:
            return self.monitoring.DISABLE  # a forward jump: never a loop's back-edge
        try:
            chooser = self.chooser
            action = chooser.on_back_edge((code, destination_offset), self._clock_ns(), self.enclosing_of)
            if action == MARK:
                if chooser.new_clock:
                    self.describe(chooser.clock, code, destination_offset, chooser.encloses)
                self.mark(chooser.clock)
            elif action == DISABLE:
                return self.monitoring.DISABLE
        except Exception as error:
            self.turn_off(error)
            return self.monitoring.DISABLE
        return None

    def enclosing_of(self, key):
        code = key[0]
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        return enclosing_loops(frame, self.ranges_of)

    def ranges_of(self, code):
        if code not in self.codes:
            return None
        ranges = self.codes[code]
        if ranges is None:
            ranges = self.codes[code] = loop_ranges(code)
        return ranges

    def describe(self, clock, code, offset, encloses=()):
        from gpuleak import _collector

        line = line_of(code, offset)
        function = getattr(code, "co_qualname", code.co_name)
        value = {
            "source": _collector.STEP_FROM_PYTHON_LOOP,
            "clock": clock,
            "description": "iterations of the loop in %s (%s:%d)"
            % (function, os.path.basename(code.co_filename), line),
            "file": code.co_filename,
            "line": line,
            "function": function,
        }
        if encloses:
            # Clocks of inner loops followed before this one: pieces of its
            # iterations, which the analysis never makes the report's phase
            # over this one's (src/analysis, growth_report_of_phases).
            value["encloses"] = list(encloses)
        self.annotate_key("iteration_clock", value)

    # -- off --

    def turn_off(self, error):
        if not self.on:
            return
        self.on = False
        say_once(
            "python-loop",
            "following the main script's loop failed (%s); it is off from " "now on, the program runs on" % error,
        )
        try:
            self.monitoring.set_events(self.tool, 0)
            for code in list(self.codes):
                self.monitoring.set_local_events(self.tool, code, 0)
        except Exception:
            pass
        self.annotate({"available": False, "reason": "turned off after an error: %s" % error})

    def annotate(self, value):
        self.annotate_key("python_loop", value)

    def annotate_key(self, key, value):
        try:
            self.collector.annotate(key, json.dumps(value))
        except Exception:
            pass


_signal = None


class EarlyAnnotations:
    """Annotations through the loaded collector, else kept for the first one
    (_startup_annotations.py): start-up loads neither it nor ctypes."""

    @staticmethod
    def annotate(key, value_json):
        collector_module = sys.modules.get("gpuleak._collector")
        loaded = getattr(collector_module, "_loaded", None)
        if loaded is not None:
            loaded.annotate(key, value_json)
        else:
            from gpuleak import _startup_annotations

            _startup_annotations.keep(key, value_json)


class StepMarks:
    """Marks at each pass of the chosen loop, once the collector is in the process.

    Start-up does not load the collector (a process that never uses CUDA
    should not pay for it): until the CUDA driver's injection or the package
    loaded it, marks are dropped, and whether it is there is checked at most
    every 0.1 s (dlopen with RTLD_NOLOAD)."""

    def __init__(self, clock=time.monotonic):
        self.step_clock = None
        self.next_check_s = 0.0
        self.clock = clock

    def __call__(self, clock_number):
        step_clock = self.step_clock
        if step_clock is None:
            now = self.clock()
            if now < self.next_check_s:
                return
            self.next_check_s = now + 0.1
            from gpuleak import _collector, _runtime

            if not _collector.loaded_in_process():
                return
            step_clock = self.step_clock = _runtime.clock()
        step_clock.python_loop_pass(clock_number)


def install(collector=None, environ=None, version_info=None):
    """Follows the main script's loop from now on (Python 3.12+), once. Never raises.

    Called at start-up (sitecustomize, before the script runs). `collector`
    is where annotations go (default: kept until the collector is loaded).
    Returns the LoopSignal, or None where it is unavailable (the
    `python_loop` annotation says why)."""
    global _signal
    if _signal is not None:
        return _signal
    collector = EarlyAnnotations() if collector is None else collector
    try:
        reason = unavailable_reason(version_info, environ)
        if reason is None:
            signal = LoopSignal(sys.monitoring, collector, StepMarks())
            reason = signal.start()
            if reason is None:
                _signal = signal
                return signal
        collector.annotate("python_loop", json.dumps({"available": False, "reason": reason}))
    except Exception as error:
        say_once("python-loop", "cannot follow the main script's loop (%s)" % error)
    return None
