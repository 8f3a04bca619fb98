"""One-line notices on stderr, each said at most once per process.

The package runs inside someone else's training job: when something goes
wrong it must say so once, briefly, and never flood the job's log.
"""

import sys

_said = set()


def say_once(topic, text):
    """Writes `gpuleak: <text>` to stderr the first time `topic` comes up."""
    if topic in _said:
        return
    _said.add(topic)
    try:
        line = "gpuleak: " + " ".join(str(text).split())
        sys.stderr.write(line[:400] + "\n")
        sys.stderr.flush()
    except Exception:  # a closed or broken stderr must not hurt the program
        pass
