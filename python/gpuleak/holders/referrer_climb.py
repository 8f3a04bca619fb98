"""Referrer climb: from the objects that keep the memory up through Python
references (gc.get_referrers, one heap scan per level for all starting
objects together) to the container that collects them and to a named root.

Climbing stops only at roots that name everything below them: module
namespaces, classes and modules. It goes on above instances, functions
(closures, lambdas), bound methods, partials and lru_cache wrappers, so that
a list of closures or of bound methods is found as the list it is.
"""

import collections
import functools
import gc
import sys
import types

from gpuleak.holders.object_reads import (
    CONTAINER_TYPES,
    GENERATOR_TYPES,
    LRU_CACHE_TYPE,
    TRACEBACK_TYPES,
    is_a,
    is_namespace_of,
)

CLIMB_SAMPLE_PER_SITE = 12
CLIMB_SAMPLE_TOTAL = 96
_CLIMB_MAX_DEPTH = 10
_CLIMB_MAX_FRONTIER = 128
_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED: a function body with fast locals
# The end of the owner of a local of a frame that has returned, kept by an exception's
# traceback (ReferrerClimb.finished_local).
FINISHED_FRAME_OWNER = ", which has returned; an exception's traceback keeps its frame"
# Objects that only relay a reference when naming: the name is found above them.
RELAY_TYPES = (types.CellType, types.FrameType, types.TracebackType, BaseException, types.MethodType, functools.partial)


class Climb:
    """References found above some starting objects, by id (the objects live in Walk.keep)."""

    def __init__(self):
        self.parents = {}  # id(child) -> [id(referrer), ...]
        self.cover = {}  # id(node) -> bitmask of the starting objects below it
        self.depth = {}  # id(node) -> level at which it was first seen
        self.traceback = {}  # id(node) -> True when a path below it passes a traceback
        self.order = []  # ids in the order they were found


class ReferrerClimb:
    """The climbing part of the walk (state lives in walk.Walk)."""

    def is_root(self, obj):
        """True for objects that name what they hold; naming stops there."""
        if is_a(obj, dict):
            return id(obj) in self.module_dicts
        if is_a(obj, LRU_CACHE_TYPE):
            return False
        if is_a(obj, CONTAINER_TYPES) or is_a(obj, RELAY_TYPES):
            return False
        return True  # instances, classes, functions, generators, modules

    def stops_climb(self, obj):
        """Roots above which nothing more specific can be found."""
        if is_a(obj, dict):
            return id(obj) in self.module_dicts
        return is_a(obj, (type, types.ModuleType) + GENERATOR_TYPES)

    def ignored(self, obj):
        if id(obj) in self.own_ids:
            return True
        if is_a(obj, types.FrameType):
            return obj.f_code.co_filename.startswith(self.package_dir)
        return False

    def climb(self, starts):
        """Follows referrers upward, level by level, from `starts` until roots."""
        result = Climb()
        for index, obj in enumerate(starts):
            key = id(obj)
            self.keep[key] = obj
            result.cover[key] = result.cover.get(key, 0) | (1 << index)
            result.depth.setdefault(key, 0)
            result.traceback[key] = is_a(obj, TRACEBACK_TYPES)
            result.order.append(key)
        frontier = self.own(list(starts))
        for level in range(1, _CLIMB_MAX_DEPTH + 1):
            # The starting objects are climbed whatever they are.
            expandable = self.own([obj for obj in frontier if level == 1 or not self.stops_climb(obj)])
            if not expandable or self.out_of_time():
                break
            targets = self.own(tuple(expandable))
            target_ids = {id(obj) for obj in expandable}
            referrers = self.own(gc.get_referrers(*targets))
            next_frontier = self.own([])
            # A leaf's .grad is held by the leaf in C++ (no Python reference
            # leads to it): the leaf counts as its referrer, so that the
            # gradients of replaced parameters lead to the optimizer state
            # that keeps the parameters.
            grad_owners = getattr(self, "grad_owners", None) or {}
            links = [(referrer, None) for referrer in referrers]
            links += [(grad_owners[id(obj)], [id(obj)]) for obj in expandable if id(obj) in grad_owners]
            for referrer, children in links:
                if self.ignored(referrer):
                    continue
                if children is None:
                    referents = gc.get_referents(referrer)
                    children = [id(obj) for obj in referents if id(obj) in target_ids]
                    del referents
                if not children:
                    continue
                key = id(referrer)
                if key not in result.depth:
                    self.keep[key] = referrer
                    result.depth[key] = level
                    result.cover[key] = 0
                    result.traceback[key] = is_a(referrer, TRACEBACK_TYPES)
                    result.order.append(key)
                    next_frontier.append(referrer)
                for child in children:
                    parents = result.parents.setdefault(child, [])
                    if key not in parents:
                        parents.append(key)
                    result.cover[key] |= result.cover.get(child, 0)
                    if result.traceback.get(child):
                        result.traceback[key] = True
            del referrers[:]
            del links[:]
            frontier = self.own(next_frontier[:_CLIMB_MAX_FRONTIER])
        return result

    def choosable(self, climb, key):
        """Whether the object could be named as the holder of what is below it."""
        obj = self.keep[key]
        if is_a(obj, LRU_CACHE_TYPE):
            return True
        if is_a(obj, dict) and id(obj) in self.hook_dicts:
            return True
        if not is_a(obj, CONTAINER_TYPES) or self.is_root(obj):
            return False
        if is_a(obj, dict) and (id(obj) in self.module_slots or self.dict_owner(climb, key) is not None):
            return False  # a namespace: the attribute is named by its owner
        for parent_key in climb.parents.get(key, ()):
            parent = self.keep.get(parent_key)
            if is_a(parent, types.FunctionType) and (parent.__closure__ is obj or parent.__defaults__ is obj):
                return False  # a function's own cells or defaults
            if is_a(parent, LRU_CACHE_TYPE):
                return False  # the cache inside an lru_cache wrapper
        return True

    def choose_holder(self, climb, sample_mask, elements):
        """The container that collects the most of the site's elements (the lowest on a tie).

        When no container gathers them, the first element is its own holder
        (a tensor kept by a global, an attribute or a local).
        """
        best_key, best_score = id(elements[0]), None
        for key in climb.order:
            covered = climb.cover.get(key, 0) & sample_mask
            if not covered or not self.choosable(climb, key):
                continue
            score = (bin(covered).count("1"), -climb.depth.get(key, 0))
            if best_score is None or score > best_score:
                best_key, best_score = key, score
        return best_key

    def dict_owner(self, climb, dict_key):
        """The instance or class whose namespace this dict is, if the climb saw it."""
        target = self.keep[dict_key]
        for parent_key in climb.parents.get(dict_key, ()):
            parent = self.keep.get(parent_key)
            if parent is not None and is_namespace_of(parent, target):
                return parent
        return None

    def chain_to_root(self, climb, start_key):
        """Shortest chain [start, ..., root] upward to a named root, or None.

        The last element is the id of a root object, or a tuple
        ("frame", owner, variable, function, code) when the top object is a local
        of a running frame (or the exception being handled).
        """
        queue = collections.deque([[start_key]])
        visited = {start_key}
        while queue:
            chain = queue.popleft()
            top = chain[-1]
            parents = [p for p in climb.parents.get(top, ()) if p not in visited]
            for parent in parents:
                if self.is_root(self.keep[parent]):
                    return chain + [parent]
            local = self.live_local(self.keep[top])
            if local is not None:
                return chain + [local]
            for parent in parents:
                visited.add(parent)
                queue.append(chain + [parent])
        return None

    def live_local(self, obj):
        """("frame", owner, variable, function, code) when obj is a local of a running frame."""
        if self.frame_locals is None:
            self.frame_locals = self.collect_frame_locals()
        found = self.frame_locals.get(id(obj))
        if found is None:
            return self.finished_local(obj)
        return ("frame",) + found

    def collect_frame_locals(self):
        """id(value) -> (owner, name, function, code) for the locals of every running frame.

        Reading `f_locals` of a running function in Python < 3.13 fills a
        snapshot dict that the frame keeps: it would hold the current values
        (a whole batch, the logits) until the function returns. The walk
        empties that snapshot after reading it, so no value lives longer.
        """
        table = {}
        frames = []
        try:
            self.read_frame_locals(frames, table)
        finally:
            # Frame objects refer to their locals, and this list refers to
            # them: drop it now or the cycle keeps every frame's locals alive
            # until the next garbage collection.
            del frames[:]
        try:
            handled = sys.exc_info()[1]
            if handled is not None:
                table.setdefault(id(handled), ("exception being handled", "sys.exc_info()", "", None))
            handled = None
        except Exception:
            pass
        return table

    def finished_outer_frames(self, running):
        """Frames the climb went through that have returned but are kept (by an exception's
        traceback): at the program's exit, `skipped.append(error)` in a main() that has
        returned keeps its exceptions in a cycle (exception -> traceback -> main's frame ->
        `skipped`) that no running frame reaches. Only the outermost of them: a frame with
        a running or climbed frame of the program further out (forward() below main()) is
        not where the program keeps what it keeps."""
        climbed = {key for key, obj in self.keep.items() if is_a(obj, types.FrameType)}
        found = []
        for key in climbed:
            frame = self.keep[key]
            if key in running or not self.user_frame(frame):
                continue
            outer = frame.f_back
            while outer is not None and not ((id(outer) in climbed or id(outer) in running) and self.user_frame(outer)):
                outer = outer.f_back
            if outer is None:
                found.append(frame)
            outer = frame = None
        return found

    def user_frame(self, frame):
        code = frame.f_code
        return not code.co_filename.startswith(self.package_dir) and bool(code.co_flags & _CO_OPTIMIZED)

    def finished_local(self, obj):
        """("frame", ...) when obj is a local of a returned frame a traceback keeps, else None."""
        if getattr(self, "finished_locals_size", None) != len(self.keep):
            self.finished_locals_size = len(self.keep)
            table = {}
            running = set()
            for frame in sys._current_frames().values():
                while frame is not None:
                    running.add(id(frame))
                    frame = frame.f_back
            finished = self.finished_outer_frames(running)
            try:
                for frame in finished:
                    code = frame.f_code
                    function = getattr(code, "co_qualname", code.co_name)
                    owner = "local of %s (%s:%d)%s" % (
                        function,
                        code.co_filename,
                        code.co_firstlineno,
                        FINISHED_FRAME_OWNER,
                    )
                    self.user_code.append(code)
                    for name, value in frame.f_locals.items():
                        table.setdefault(id(value), (owner, name, function, code))
                    value = None
            except Exception:
                pass
            finally:
                del finished[:]
                frame = None
            self.finished_locals = table
        found = self.finished_locals.get(id(obj))
        return None if found is None else ("frame",) + found

    def read_frame_locals(self, frames, table):
        for frame in sys._current_frames().values():
            while frame is not None:
                frames.append(frame)
                frame = frame.f_back
        snapshot_is_a_copy = sys.version_info < (3, 13)
        # Outermost first: a value passed down as an argument belongs to the
        # frame that created it.
        for frame in reversed(frames):
            code = frame.f_code
            if code.co_filename.startswith(self.package_dir) or not code.co_flags & _CO_OPTIMIZED:
                continue  # the walk itself; module bodies (their globals are the module's dict)
            function = getattr(code, "co_qualname", code.co_name)
            owner = "local of %s (%s:%d)" % (function, code.co_filename, code.co_firstlineno)
            self.user_code.append(code)
            try:
                snapshot = frame.f_locals
                items = list(snapshot.items())
                if snapshot_is_a_copy and type(snapshot) is dict:
                    snapshot.clear()
                snapshot = None
            except Exception:
                continue
            for name, value in items:
                table.setdefault(id(value), (owner, name, function, code))
            items = value = None
        frame = None
