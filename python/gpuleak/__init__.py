"""gpuleak's in-process package: step boundaries, memory samples, holder walks.

`gpuleak run python train.py` loads it without any change to the program
(see python/boot/sitecustomize.py and docs/python.md). Programs may also use
this small public API; every function is a cheap no-op when the program does
not run under `gpuleak run`, and none ever raises.
"""

__all__ = ["step", "annotate", "is_recording"]


_explicit_step = None  # the clock's bound method, looked up once


def step():
    """Marks the end of a training step.

    Once called, explicit steps replace the steps gpuleak derives from
    optimizer.step(). Call it once per iteration, where the iteration ends.
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
