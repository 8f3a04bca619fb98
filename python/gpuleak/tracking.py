"""Tracking a block of code from inside the program: `with gpuleak.track() as block:`.

For tests, notebooks and CI jobs that ask "did this code leak GPU memory?"
without running the whole program under `gpuleak run`.

How it works. The first block started in a process loads the collector
(the one this installation carries, _install_layout.py) with ctypes and
starts it recording into a private folder, then sets up what `gpuleak run`
sets up in a Python process (gpuleak/_boot.py): PyTorch's allocator hook
once CUDA is up, optimizer and DataLoader steps, CuPy's and JAX's adapters.
The process then records for the rest of its life, into one trace. Each
block puts two `tracked_block` annotations in it, begin and end; at the
end, the CLI reports on the events between them (`gpuleak report --block
N`, analysis/tracked_block_window.h):
  * memory allocated in the block and still allocated at its end (what a
    test or a cell left behind), by the line that allocated it;
  * growth over the steps inside the block (optimizer steps, DataLoader
    batches, gpuleak.step()), with the usual LEAK verdict;
  * what holds the memory and the statement that stores into it: the
    package walks the heap for the blocks left behind (in a forked copy,
    as for `gpuleak run`'s requests) and the report reads the answer.

Under `gpuleak run` the run's collector is used, and the run's report has
the whole program besides.

Blocks may nest (each one sees every allocation made while it is open) and
may be opened from several threads; allocations are the process's, not the
thread's, and each block says what the whole process did meanwhile.
Where tracking cannot start (no collector in this installation, no CUDA),
`track()` says so once on stderr and the code runs untracked; its result
then says why (`verdict == "not tracked"`).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading

from gpuleak._notice import say_once

# Verdicts of a block, in the order a reader cares about them.
LEAK = "leak"  # memory grew step after step inside the block
LEFT_BEHIND = "left behind"  # memory allocated in the block is still allocated at its end
CLEAN = "clean"
NOT_TRACKED = "not tracked"

# Growth needs steps: a block whose code marks a few dozen steps is judged
# over them after these many (the CLI's --warmup-steps and --min-steps).
DEFAULT_WARMUP_STEPS = 2
DEFAULT_MIN_STEPS = 8

# The holder walk's time budget per block end (seconds); the program waits for it.
HOLDER_WALK_SECONDS = 5.0
# The CLI reads the trace from its start each time: a bound on one report.
REPORT_TIMEOUT_S = 300


class TrackingError(RuntimeError):
    """A block used the wrong way (stopped twice, or results asked before its end)."""


class _ProcessTracking:
    """The process's one recorder and trace, set up by the first block."""

    def __init__(self):
        self.collector = None
        self.cli = None
        self.trace_dir = None
        self.unavailable = None  # why nothing can be tracked, once known
        self.next_block = 1
        self.lock = threading.Lock()
        self.open_blocks = []  # started and not stopped, innermost last

    def ensure_started(self, output_dir):
        """Starts recording if nothing records yet. Returns None, or why tracking is off."""
        if self.collector is not None or self.unavailable is not None:
            return self.unavailable
        from gpuleak import _collector

        if _collector.loaded_in_process() and _collector.load().is_recording():
            # Under `gpuleak run`: its collector records this process already.
            self.collector = _collector.load()
            self.trace_dir = os.environ.get("GPULEAK_TRACE_DIR") or "gpuleak-traces"
            from gpuleak._install_layout import native_parts

            self.cli = native_parts()[0]
            return None
        from gpuleak._install_layout import native_parts

        cli, collector_path = native_parts()
        if collector_path is None or cli is None:
            self.unavailable = (
                "this installation of gpuleak has no %s (install the wheel, or "
                "build with scripts/setup)" % ("collector" if collector_path is None else "gpuleak binary")
            )
            return self.unavailable
        trace_dir = os.path.abspath(output_dir) if output_dir else tempfile.mkdtemp(prefix="gpuleak-track-")
        os.makedirs(trace_dir, mode=0o700, exist_ok=True)
        # The package's parts read their settings from the environment when
        # they start (the allocator hook at CUDA's initialization, which may
        # come later): set as `gpuleak run` sets them, before anything loads.
        os.environ["GPULEAK_COLLECTOR"] = collector_path
        os.environ["GPULEAK_TRACE_DIR"] = trace_dir
        os.environ.setdefault("GPULEAK_HOLDER_REQUESTS", "1")
        if "GPULEAK_TORCH_MODE" not in os.environ:
            user_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF")
            os.environ["GPULEAK_TORCH_MODE"] = "user" if user_conf else "hook"
        collector = _collector.load()
        if collector is None or not collector.start_recording():
            self.unavailable = "the collector %s could not start recording" % collector_path
            return self.unavailable
        self.collector, self.cli, self.trace_dir = collector, cli, trace_dir
        _set_up_frameworks()
        return None

    def trace_path(self):
        return os.path.join(self.trace_dir, "gpuleak-%d.trace" % os.getpid())


def _set_up_frameworks():
    """What `gpuleak run`'s boot does in a Python process, for frameworks imported now or later.
    The main script's loop is not followed: in a test runner or a kernel it is not the user's."""
    import sys

    from gpuleak import _array_frameworks, _boot

    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "optim", None) is not None:
        _boot.on_torch_imported(torch)  # runs the CUDA set-up now when CUDA is up
    elif not any(isinstance(f, _boot.TorchImportWatcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _boot.TorchImportWatcher())
    _array_frameworks.watch()


_process = _ProcessTracking()


class TrackedBlock:
    """One tracked block. Its results are there once it has ended (`with` left, or stop())."""

    def __init__(self, name=None, warmup_steps=DEFAULT_WARMUP_STEPS, min_steps=DEFAULT_MIN_STEPS, output_dir=None):
        self.name = None if name is None else str(name)
        self.warmup_steps = int(warmup_steps)
        self.min_steps = int(min_steps)
        self.output_dir = output_dir
        self.block = None  # its number in the process's trace
        self.started = False
        self.ended = False
        self._result = None

    # ---- beginning and end ------------------------------------------------------

    def start(self):
        if self.started:
            raise TrackingError("gpuleak: this block was started already; use a new track()")
        self.started = True
        with _process.lock:
            why_not = _process.ensure_started(self.output_dir)
            if why_not is None:
                self.block = _process.next_block
                _process.next_block += 1
            _process.open_blocks.append(self)
        if why_not is not None:
            say_once("track-unavailable", "gpuleak.track(): nothing is tracked: %s" % why_not)
            self._result = TrackResult.not_tracked(self.name, why_not)
            return self
        _mark(self.block, "begin", self.name)
        return self

    def stop(self):
        """Ends the block and reads its report (a few seconds: the CLI reads the trace)."""
        if not self.started:
            raise TrackingError("gpuleak: stop() of a block that was never started")
        if self.ended:
            raise TrackingError("gpuleak: this block was stopped already")
        self.ended = True
        with _process.lock:
            if self in _process.open_blocks:
                _process.open_blocks.remove(self)
        if self.block is None:
            return self._result
        _release_library_caches()
        _mark(self.block, "end", self.name)
        self._result = _report_block(self)
        return self._result

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        try:
            self.stop()
        except Exception as error:  # the block's own exception (if any) must come through
            say_once("track-report", "gpuleak.track(): no report for the block (%s)" % error)
            self._result = TrackResult.not_tracked(self.name, "no report: %s" % error)
        return False

    def __call__(self, function):
        """As a decorator: each call of `function` is a block of its own (see `last`)."""
        import functools

        @functools.wraps(function)
        def tracked(*args, **kwargs):
            block = TrackedBlock(self.name or function.__qualname__, self.warmup_steps, self.min_steps, self.output_dir)
            with block:
                value = function(*args, **kwargs)
            tracked.last = block.result
            return value

        tracked.last = None
        return tracked

    # ---- results --------------------------------------------------------------------

    @property
    def result(self):
        if self._result is None:
            raise TrackingError("gpuleak: the block has not ended yet; its result comes at its end")
        return self._result

    def __getattr__(self, attribute):
        # block.verdict, block.left_behind_bytes, ...: the result's, once there.
        if attribute.startswith("_") or attribute in ("name", "block", "started", "ended"):
            raise AttributeError(attribute)
        return getattr(self.result, attribute)

    def __repr__(self):
        if self._result is None:
            return "<gpuleak block %s%s>" % (self.block, " (open)" if self.started else "")
        return repr(self._result)


def _release_library_caches():
    """Gives back the cuBLAS and cuBLASLt workspaces PyTorch keeps per handle and stream
    (32 MiB each on recent GPUs) before a block ends. PyTorch allocates one the first time a
    thread multiplies matrices on a stream (the autograd engine's thread has its own) and
    keeps it for the life of the process: a cache, which a block that happened to run first
    would otherwise leave behind. The next matrix product allocates it again. Never raises."""
    torch = sys.modules.get("torch")
    clear = getattr(getattr(torch, "_C", None), "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return
    try:
        if torch.cuda.is_initialized():
            clear()
    except Exception as error:
        say_once(
            "track-workspaces",
            "could not release PyTorch's cuBLAS workspaces before the "
            "block's end (%s); they may be counted as left behind" % error,
        )


def _mark(block, event, name):
    value = {"event": event, "block": block}
    if name:
        value["name"] = name
    _process.collector.annotate("tracked_block", json.dumps(value))


def _report_block(block):
    """The block's report, with holders walked for what it left behind."""
    from gpuleak import _forked_walk, _holder_requests

    # Holder walks the steps started answer in the background: their answers
    # belong to this report.
    _forked_walk.wait_for_walks(HOLDER_WALK_SECONDS + 3)
    _process.collector.flush()
    process = _read_report(block)
    request = _holder_request_for_left_behind(block.block, process)
    if request is not None:
        from gpuleak import holders

        answer, failure = _forked_walk.run_isolated(
            lambda: holders.answer_request(request, HOLDER_WALK_SECONDS), HOLDER_WALK_SECONDS + 3
        )
        if answer is None:
            answer = _holder_requests.failed_answer(request, failure)
        _process.collector.annotate("holder", json.dumps(answer, default=str))
        _process.collector.flush()
        process = _read_report(block)
    return TrackResult(block.name, block.block, process, _process.trace_path(), _process.cli)


def _read_report(block):
    command = [
        _process.cli,
        "report",
        "--json",
        "--block",
        str(block.block),
        "--warmup-steps",
        str(block.warmup_steps),
        "--min-steps",
        str(block.min_steps),
        _process.trace_path(),
    ]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the CLI is not a CUDA program
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=REPORT_TIMEOUT_S)
    if not done.stdout.strip():
        raise RuntimeError(
            (
                done.stderr.decode("utf-8", "replace").strip()
                or "gpuleak report exited with status %d" % done.returncode
            )[:500]
        )
    report = json.loads(done.stdout.decode("utf-8"))
    pid = os.getpid()
    for process in report.get("processes", []):
        if process.get("pid") == pid:
            return process
    raise RuntimeError("the report has no process %d" % pid)


# The walk looks for at most this many groups (largest first).
_HOLDER_GROUPS = 3


def _holder_request_for_left_behind(block, process):
    """A holder request for the largest groups the block left behind that have none yet."""
    sites = []
    for group in (process.get("leaks") or {}).get("groups", []):
        if not group.get("sample_blocks") or not group.get("stack_ids"):
            continue
        lines = [
            [frame.get("file"), frame.get("line")]
            for frame in group.get("frames") or []
            if frame.get("language") == "python" and frame.get("line")
        ]
        if _named_on_its_stack(group.get("holder"), lines):
            continue
        sites.append({"site_id": group["stack_ids"][0], "addresses": group["sample_blocks"], "lines": lines})
        if len(sites) == _HOLDER_GROUPS:
            break
    if not sites:
        return None
    return {"request_id": "tracked-block-%d" % block, "sites": sites}


def _named_on_its_stack(answer, lines):
    """Whether a holder answer (from a walk at a step, which knew no stack) names a holder and a
    keeping statement on the allocation's own stack; if not, the walk is asked again with it."""
    holder = (answer or {}).get("holder")
    if not holder:
        return False
    kept = holder.get("kept_at") or {}
    return not kept or [kept.get("file"), kept.get("line")] in lines


class Site:
    """A line of the program that allocated GPU memory, as the report names it."""

    def __init__(self, site, frames=None, **amounts):
        site = site or {}
        self.file = site.get("file") or ""
        self.line = site.get("line")
        self.function = site.get("function") or ""
        self.source_line = site.get("source_line") or ""
        self.label = site.get("label") or "%s:%s" % (os.path.basename(self.file), self.line)
        self.frames = frames or []
        for key, value in amounts.items():
            setattr(self, key, value)

    def __repr__(self):
        return "<gpuleak site %s %s>" % (self.label, self.function)


class TrackResult:
    """What a block did with GPU memory: its verdict, where, what holds it, how to fix it."""

    def __init__(self, name, block, process, trace, cli):
        self.name = name
        self.block = block
        self.report = process  # the block's process report (JSON, docs/json-schema.md)
        self.trace = trace
        self._cli = cli
        self.reason = None
        growth = process.get("growth") or {}
        leaks = process.get("leaks") or {}
        self.steps = int(growth.get("steps") or 0)
        self.leak = growth.get("verdict") == "LEAK"
        self.growth_bytes_per_step = float(growth.get("rate_bytes_per_step") or 0.0) if self.leak else 0.0
        self.growing_sites = [
            Site(
                s.get("site"),
                s.get("frames"),
                bytes_per_step=s.get("rate_bytes_per_step"),
                live_bytes=s.get("live_bytes"),
            )
            for s in growth.get("sites") or []
            if not s.get("bounded")
        ]
        self.left_behind_bytes = int(leaks.get("bytes") or 0)
        self.left_behind = [
            Site(
                g.get("site"),
                g.get("frames"),
                bytes=g.get("bytes"),
                allocations=g.get("allocations"),
                holder=g.get("holder"),
            )
            for g in leaks.get("groups") or []
        ]
        self.peak_bytes = int(process.get("peak_live_bytes") or 0)
        self.allocations = int((process.get("events") or {}).get("allocations") or 0)
        answer = growth.get("holder") if self.leak else None
        if answer is None and self.left_behind:
            answer = self.left_behind[0].holder
        self.holder_answer = answer or None
        holder = (answer or {}).get("holder") or None
        self.holder = _describe_holder(holder)
        kept = (holder or {}).get("kept_at")
        self.keeping_line = None
        if kept and kept.get("line"):
            self.keeping_line = "%s:%s" % (kept.get("file"), kept.get("line"))
            if kept.get("statement"):
                self.keeping_line += "  " + kept["statement"]
        self.fix = (growth.get("fix") if self.leak else None) or (answer or {}).get("fix")
        block_state = process.get("tracked_block") or {}
        self.complete = bool(block_state.get("ended")) and bool((process.get("verdict") or {}).get("complete", True))
        if self.leak:
            self.verdict = LEAK
        elif self.left_behind_bytes > 0:
            self.verdict = LEFT_BEHIND
        else:
            self.verdict = CLEAN

    @classmethod
    def not_tracked(cls, name, reason):
        result = cls.__new__(cls)
        result.name, result.block, result.report, result.trace, result._cli = name, None, None, None, None
        result.reason = reason
        result.steps = 0
        result.leak = False
        result.growth_bytes_per_step = 0.0
        result.growing_sites, result.left_behind = [], []
        result.left_behind_bytes = result.peak_bytes = result.allocations = 0
        result.holder_answer = result.holder = result.keeping_line = result.fix = None
        result.complete = False
        result.verdict = NOT_TRACKED
        return result

    @property
    def tracked(self):
        return self.verdict != NOT_TRACKED

    def summary(self):
        """The result in a few lines, for a test's failure or a notebook."""
        from gpuleak._quantities import format_bytes

        title = "gpuleak: block%s" % (" `%s`" % self.name if self.name else "")
        if not self.tracked:
            return "%s not tracked: %s" % (title, self.reason)
        lines = []
        if self.leak:
            top = self.growing_sites[0] if self.growing_sites else None
            lines.append(
                "%s LEAK +%s/step over %d steps%s"
                % (title, format_bytes(self.growth_bytes_per_step), self.steps, (" at %s" % _where(top)) if top else "")
            )
        elif self.left_behind_bytes:
            places = len(self.left_behind)
            lines.append(
                "%s left %s allocated at its end (%d place%s)"
                % (title, format_bytes(self.left_behind_bytes), places, "" if places == 1 else "s")
            )
            for site in self.left_behind[:5]:
                count = site.allocations or 0
                lines.append(
                    "  %s in %d allocation%s at %s"
                    % (format_bytes(site.bytes or 0), count, "" if count == 1 else "s", _where(site))
                )
        else:
            lines.append(
                "%s clean: nothing it allocated is still allocated (peak %s, %d "
                "allocations%s)"
                % (
                    title,
                    format_bytes(self.peak_bytes),
                    self.allocations,
                    ", %d steps" % self.steps if self.steps else "",
                )
            )
        if self.holder:
            lines.append("  held by %s" % self.holder)
        if self.keeping_line:
            lines.append("  kept at %s" % self.keeping_line)
        if self.fix:
            lines.append("  fix: %s" % self.fix)
        if not self.complete:
            lines.append(
                "  (the block's record is incomplete: events were lost or it was cut " "short; the figures may be low)"
            )
        return "\n".join(lines)

    def text(self):
        """gpuleak's full text report of the block."""
        return self._run_cli([])

    def html(self, path):
        """Writes the block's self-contained HTML report to `path`; returns the path."""
        self._run_cli(["--html", str(path)])
        return str(path)

    def _run_cli(self, extra):
        if not self.tracked:
            raise TrackingError("gpuleak: the block was not tracked (%s)" % self.reason)
        done = subprocess.run(
            [self._cli, "report", "--block", str(self.block)] + extra + [self.trace],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=REPORT_TIMEOUT_S,
        )
        return done.stdout.decode("utf-8", "replace")

    def __str__(self):
        return self.summary()

    def __repr__(self):
        from gpuleak._quantities import format_bytes

        return "<gpuleak block %s: %s, %s left behind, peak %s>" % (
            self.name or self.block,
            self.verdict,
            format_bytes(self.left_behind_bytes),
            format_bytes(self.peak_bytes),
        )


def _where(site):
    text = "%s (%s)" % (site.label, site.function) if site.function else site.label
    if site.source_line:
        text += "  " + site.source_line.strip()
    return text


def _describe_holder(holder):
    if not holder:
        return None
    kind = holder.get("type") or "object"
    name = holder.get("name")
    owner = holder.get("owner")
    text = "%s `%s`" % (kind, name) if name else kind
    if owner:
        text += " (%s)" % owner
    return text


def track(name=None, warmup_steps=DEFAULT_WARMUP_STEPS, min_steps=DEFAULT_MIN_STEPS, output_dir=None):
    """A block to track: `with gpuleak.track("eval") as block: ...`, then `block.verdict`.

    Also a decorator (`@gpuleak.track()`: every call is a block). `output_dir`: where
    the process's trace goes when this block is the first (default: a private temporary
    folder, named by `block.trace`).
    """
    return TrackedBlock(name, warmup_steps, min_steps, output_dir)


def start(name=None, **options):
    """Starts a block (for code without a `with`): returns it; stop() ends it."""
    return TrackedBlock(name, **options).start()


def stop():
    """Ends the innermost block that start() began and is still open; returns its result."""
    with _process.lock:
        block = _process.open_blocks[-1] if _process.open_blocks else None
    if block is None:
        raise TrackingError("gpuleak: stop() without a block started by start()")
    return block.stop()
