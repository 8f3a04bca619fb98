"""gpuleak's boot file: `gpuleak run` puts this folder first on PYTHONPATH.

Python imports `sitecustomize` once at start-up. This one
  1. runs the sitecustomize that Python would have imported without gpuleak
     (the next one on sys.path: a distribution's, a virtualenv's, the user's),
  2. when GPULEAK_COLLECTOR is set, calls gpuleak._boot.install(), which
     only installs an import watcher for torch (see gpuleak/_boot.py).
It never raises, and says at most one line `gpuleak: ...` on stderr.
"""


def _run_next_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    passed_here = False
    for entry in list(sys.path):
        try:
            directory = os.path.abspath(entry or os.getcwd())
        except Exception:
            continue
        if not passed_here:
            passed_here = directory == here
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None:
            continue
        if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
            continue
        module = importlib.util.module_from_spec(spec)
        globals()["_chained_sitecustomize"] = module  # keeps what it defines alive
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # what site.py would have said, in one line
            return "the sitecustomize at %s raised %s: %s" % (spec.origin, type(error).__name__, error)
        return None
    return None


def _boot():
    import os

    problem = None
    try:
        problem = _run_next_sitecustomize()
    except Exception as error:
        problem = "could not run the next sitecustomize (%s)" % error
    if os.environ.get("GPULEAK_COLLECTOR"):
        try:
            from gpuleak import _boot as boot

            boot.install()
        except Exception as error:
            problem = problem or "could not start (%s); the program runs without gpuleak" % error
    if problem:
        try:
            import sys

            sys.stderr.write("gpuleak: %s\n" % " ".join(str(problem).split()))
        except Exception:
            pass


_boot()
del _boot, _run_next_sitecustomize
