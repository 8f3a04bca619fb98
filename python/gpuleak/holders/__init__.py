"""The holder walk: which live Python objects keep given memory alive, why, and
which statement of the program put it there.

`gpuleak run` sees allocations that stay live and grow by the same amount per
step, but only addresses and allocation stacks. This package answers the next
question from inside the process: for a set of `[address, size]` pairs it
finds the tensors whose storage covers them (kind `tensor`), or the held
tensors whose autograd graph saved tensors covering them (kind `graph`), or
the leaf that `backward(create_graph=True)` left in a reference cycle; climbs
Python references (`gc.get_referrers`) to the container that collects them and
to a *named* root (a module global, a local of a live frame, an instance or
class attribute, a buffer, a closure cell, a hook, an lru_cache, an exception
traceback); names the statement that stores into it; and ends with the fix.

The parts, one concern each:
    this module         the request protocol (docs/python-protocol.md)
    walk                one walk's state and the order of its parts
    heap_scan           every live tensor, module hooks, buffers, optimizers
    graph_walk          autograd graphs, saved tensors, grad cycles
    referrer_climb      references upward to holders and roots; frame locals
    naming              the holder's type, name, owner; what elements capture
    keeping_statement   the line that stores into the holder (Python's ast)
    diagnosis           cause and fix
    object_reads        reading objects without running their code

It runs at a step boundary on the training thread (in a forked copy, see
_forked_walk.py), never from an allocator callback, and must not disturb
the program:
  * it never raises (`answer_request` catches everything and says what failed);
  * its time is bounded (`seconds`, 2 s by default) and reported;
  * it holds no reference to the program's objects once it returns;
  * it runs none of the program's Python code: no getattr on arbitrary
    objects (properties, __getattr__), namespaces are read through
    object.__getattribute__ and gc.get_referents. One exception it cannot
    see: a tensor saved through `saved_tensors_hooks` is unpacked by the
    program's hook when the walk reads it (graphs of non-reentrant
    checkpoints, whose unpack recomputes the forward pass, are skipped);
  * the automatic garbage collector is paused during the walk, so no
    finalizer of the program runs in the middle of it.

Cost: every climbing level is one `gc.get_referrers` call, i.e. one scan of
the whole heap (about 0.2 us per object), shared by all sites of a request;
each source file the keeping statement needs is parsed once.

Addresses are plain data pointers, so the walk works on CPU tensors as well
(that is how it is tested without a GPU).
"""

import time

DEFAULT_SECONDS = 2.0


def answer_request(request, seconds=DEFAULT_SECONDS):
    """The value of the `holder` annotation answering one holder request.

    `request` is the parsed request file (docs/python-protocol.md). Never
    raises: a failure becomes an `error` field next to whatever was found.
    """
    started = time.monotonic()
    answer = {"request_id": None, "seconds": 0.0, "sites": []}
    walk = None
    try:
        from gpuleak.holders.walk import Walk

        answer["request_id"] = request.get("request_id")
        walk = Walk(started + float(seconds))
        sites = [Site(raw) for raw in (request.get("sites") or []) if isinstance(raw, dict)]
        answer["sites"] = walk.run(sites)
        if walk.timed_out:
            answer["timed_out"] = True
    except Exception as error:  # the walk must never break the training job
        answer["error"] = "%s: %s" % (type(error).__name__, error)
    finally:
        if walk is not None:
            walk.release()
    answer["seconds"] = round(time.monotonic() - started, 3)
    return answer


class Site:
    """One requested site and what the walk found for it."""

    def __init__(self, raw):
        self.site_id = raw.get("site_id")
        self.ranges = []
        for pair in raw.get("addresses") or []:
            try:
                start, size = int(pair[0]), int(pair[1])
            except (TypeError, ValueError, IndexError):
                continue
            if start > 0 and size > 0:
                self.ranges.append((start, start + size))
        # Optional: (file, line) of the frames that allocated the site, which
        # choose among several statements storing into one holder.
        self.lines = []
        for pair in raw.get("lines") or []:
            try:
                self.lines.append((str(pair[0]), int(pair[1])))
            except (TypeError, ValueError, IndexError):
                continue
        self.direct_matches = set()  # indices of ranges covered by a live tensor's storage
        self.graph_matches = set()  # indices covered by a tensor saved in a held graph
        self.cycle_matches = set()  # indices covered by a leaf in a create_graph cycle
        self.direct_tensors = None  # covering tensors (a list the walk owns)
        self.graph_roots = None  # held tensors whose graph covers some range
        self.cycle_leaves = None  # leaves whose .grad graph reaches back to them
        self.graph_carried = []  # chain lengths of the carried states that lead graph_roots
        self.graph_sizes = []  # saved tensors per graph, one entry per root
        self.answer = None
        self.candidates = []  # (kind, elements) to climb from, the likelier first
