"""Runs a walk in a forked copy of this process (docs/python-protocol.md).

Every holder walk runs in a copy (run_isolated), so nothing that goes wrong
in it can stop the training job, and the job goes on while the copy walks
(run_in_background): it pauses only for the fork, not for the walk's time
budget (a 12-layer GPT-2 step lost 0.7-1.5 s, once per process, while the
parent waited). wait_for_walks lets whoever ends the program wait for the
answers still being read.
"""

import json
import os
import select
import threading
import time
import warnings

from gpuleak._notice import say_once


def run_isolated(function, timeout_s):
    """Runs function() in a forked copy of this process and returns its JSON-able result.

    The holder walk reads the whole heap and autograd graphs through
    PyTorch's C++ accessors; whatever goes wrong there must not take the
    training job down. The child works on a copy-on-write snapshot, touches
    no CUDA (only Python objects and tensor metadata), sends its answer
    through a pipe and leaves with os._exit. Returns (result, None) or
    (None, why it failed). Never raises.
    """
    child, failure = _fork_isolated(function)
    if child is None:
        return None, failure
    return _collect_isolated(child, timeout_s)


def _fork_isolated(function):
    """Forks a copy that runs function() and writes its result as JSON to a pipe.
    Returns ((pid, read_end), None) or (None, why not)."""
    try:
        read_end, write_end = os.pipe()
    except OSError as error:
        return None, "cannot make a pipe (%s)" % error
    try:
        with warnings.catch_warnings():
            # fork() in a multi-threaded process warns (3.12); the child only
            # runs Python code that takes no lock another thread could hold.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        return None, "cannot fork (%s)" % error
    if pid == 0:  # the child
        status = 1
        try:
            os.close(read_end)
            data = json.dumps(function(), default=str).encode("utf-8")
            view = memoryview(data)
            while view:
                written = os.write(write_end, view)
                view = view[written:]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return (pid, read_end), None


def _collect_isolated(child, timeout_s):
    """Reads the forked copy's answer; kills it at timeout_s. (result, None) or (None, why)."""
    pid, read_end = child
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, 9)
                return None, "the holder walk took longer than %.1f s" % timeout_s
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        try:
            _, status = os.waitpid(pid, 0)
        except OSError:
            status = 0
    if status != 0:
        how = (
            ("killed by signal %d" % os.WTERMSIG(status))
            if os.WIFSIGNALED(status)
            else "exit status %d" % os.WEXITSTATUS(status)
        )
        return None, "the holder walk failed in its isolated copy (%s); the program is unaffected" % how
    try:
        return json.loads(b"".join(chunks).decode("utf-8")), None
    except ValueError as error:
        return None, "unreadable answer from the holder walk (%s)" % error


# Walks whose answers are still being read (threads of run_in_background).
_walks_in_flight = []
_walks_lock = threading.Lock()


def _forget_walks_in_child():
    # A forked child (a DataLoader worker, the walk's own copy) has none of
    # these threads, and the lock may have been held by one of them at fork.
    global _walks_lock
    _walks_lock = threading.Lock()
    del _walks_in_flight[:]


os.register_at_fork(after_in_child=_forget_walks_in_child)


def run_in_background(function, timeout_s, deliver):
    """Forks a copy that runs function() now and returns; a thread reads the result and
    calls deliver(result, failure) as run_isolated would return them. The program waits
    only for the fork, not for the walk (up to its budget: 2 s by default, 30 s at most);
    the copy still sees the heap of this moment, so what it names is what held the memory
    here.

    The reader threads are not daemons: a program that ends meanwhile waits for them at
    exit (at most timeout_s), so its last walk still reaches the trace."""
    child, failure = _fork_isolated(function)
    if child is None:
        deliver(None, failure)
        return

    def read_result():
        try:
            deliver(*_collect_isolated(child, timeout_s))
        except Exception as error:
            say_once("holder-answer", "writing a holder answer failed (%s)" % error)
        finally:
            with _walks_lock:
                if reader in _walks_in_flight:
                    _walks_in_flight.remove(reader)

    reader = threading.Thread(target=read_result, name="gpuleak-holder-answer", daemon=False)
    try:
        reader.start()
    except RuntimeError:  # no thread can start (the interpreter is ending): read it here
        read_result()
        return
    with _walks_lock:
        if reader.is_alive():  # one that ended already is not waited for
            _walks_in_flight.append(reader)


def wait_for_walks(timeout_s=None):
    """Waits until every walk started so far has delivered its answer; True if all did."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        with _walks_lock:
            # Dead ones: a reader that ended as it was listed.
            _walks_in_flight[:] = [t for t in _walks_in_flight if t.is_alive()]
            pending = list(_walks_in_flight)
        if not pending:
            return True
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        pending[0].join(left)
