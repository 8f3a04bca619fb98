"""Annotations made at start-up, before anything loaded the collector.

sitecustomize must not load the collector (or ctypes): a Python process that
never uses CUDA should not pay for it. What the package says about itself
then (python_loop.py: whether it can follow the main script's loop) is kept
here, and the first Collector takes it (_collector.py) and writes it once
recording starts.
"""

# At most this many (a handful are made; more would mean a bug annotating in a loop).
MAX_KEPT = 64

_kept = []


def keep(key, value_json):
    if len(_kept) < MAX_KEPT:
        _kept.append((key, value_json))


def take():
    """[(key, value_json)] kept so far, oldest first; forgets them."""
    taken = list(_kept)
    del _kept[:]
    return taken
