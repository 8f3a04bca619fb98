"""gpuleak's in-process package: step boundaries, memory samples, holder walks.

`gpuleak run python train.py` loads it without any change to the program
(see python/boot/sitecustomize.py and docs/python.md). Programs may also use
this small public API; step(), phase() and annotate() are cheap no-ops when
nothing records, and none of them ever raises.

`gpuleak.track()` records a block of code from inside the program, with or
without `gpuleak run` (gpuleak/tracking.py); the pytest plugin
(gpuleak/pytest_plugin.py) and the IPython extension (`%load_ext gpuleak`,
gpuleak/notebook_magics.py) are built on it.
"""

__all__ = ["step", "phase", "begin_phase", "end_phase", "annotate", "is_recording", "track", "start", "stop"]


_explicit_step = None  # the clock's bound method, looked up once
_phases = []  # names of the phases begun and not ended, innermost last


def step():
    """Marks the end of an iteration (a training step, an evaluation batch).

    Where the program calls it, its calls are the iterations gpuleak counts;
    elsewhere (a call once per epoch, say) optimizer steps, DataLoader
    batches and the loops gpuleak finds by itself still count. Call it once
    per iteration, where the iteration ends.
    """
    global _explicit_step
    try:
        if _explicit_step is None:
            from gpuleak import _runtime

            _explicit_step = _runtime.clock().explicit_step
        _explicit_step()
    except Exception as error:
        from gpuleak._notice import say_once

        say_once("step", "gpuleak.step() failed (%s)" % error)


class phase:
    """Names a part of the run: `with gpuleak.phase("eval"): ...`.

    The iterations inside it (whatever marks them) are judged on their own
    and reported under this name, so a leak during evaluation is not mixed
    with training steps. Phases may nest; the innermost one names the
    iterations. Also usable as a decorator.
    """

    def __init__(self, name):
        self.name = str(name)

    def __enter__(self):
        begin_phase(self.name)
        return self

    def __exit__(self, *exc_info):
        end_phase()
        return False

    def __call__(self, function):
        import functools

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with phase(self.name):
                return function(*args, **kwargs)

        return wrapper


def begin_phase(name):
    """Begins the phase `name` (for callback APIs: Lightning's on_validation_start)."""
    _phases.append(str(name))
    _mark_phase(str(name), "begin")


def end_phase():
    """Ends the innermost phase begun; the one around it (if any) goes on."""
    if not _phases:
        return
    ended = _phases.pop()
    _mark_phase(ended, "end")
    if _phases:
        _mark_phase(_phases[-1], "begin")


def _mark_phase(name, event):
    annotate("phase", {"name": name, "event": event})


def annotate(key, value):
    """Records a fact about the run in the trace: `value` is stored as JSON.

    Returns True when it was handed to a running collector.
    """
    try:
        from gpuleak import _collector

        collector = _collector.load()
        if collector is None or not collector.is_recording():
            return False
        import json

        collector.annotate(str(key), json.dumps(value, default=str))
        return True
    except Exception as error:
        from gpuleak._notice import say_once

        say_once("annotate", "gpuleak.annotate() failed (%s)" % error)
        return False


def is_recording():
    """True while the collector records this process into a trace."""
    try:
        from gpuleak import _collector

        collector = _collector.load()
        return bool(collector is not None and collector.is_recording())
    except Exception:
        return False


def track(name=None, **options):
    """A block of code to track: `with gpuleak.track() as block: ...`, then `block.verdict`,
    `block.left_behind`, `block.holder`, `block.keeping_line` (gpuleak/tracking.py)."""
    from gpuleak import tracking

    return tracking.track(name, **options)


def start(name=None, **options):
    """Starts tracking a block without `with`; stop() ends it and returns its result."""
    from gpuleak import tracking

    return tracking.start(name, **options)


def stop():
    """Ends the innermost block start() began; returns its result."""
    from gpuleak import tracking

    return tracking.stop()


def load_ipython_extension(ipython):
    """`%load_ext gpuleak`: the %%gpuleak and %gpuleak_top magics (gpuleak/notebook_magics.py)."""
    from gpuleak import notebook_magics

    notebook_magics.register(ipython)
