"""The holder walk: which live Python objects keep given memory alive, and why.

`gpuleak run` sees allocations that stay live and grow by the same amount per
step, but only addresses and allocation stacks. This module answers the next
question from inside the process: for a set of `[address, size]` pairs it
finds the tensors whose storage covers them (kind `tensor`), or the held
tensors whose autograd graph saved tensors covering them (kind `graph`), then
climbs Python references (`gc.get_referrers`) from those objects to the
container that collects them and to a *named* root: a module global, a local
of a live frame, an instance or class attribute, a closure cell, a forward
hook, or an exception traceback. It ends with the fix for that cause.

It runs at a step boundary on the training thread, never from an allocator
callback, and must not disturb the program:
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
the whole heap (about 0.2 us per object), shared by all sites of a request.

Addresses are plain data pointers, so the walk works on CPU tensors as well
(that is how it is tested without a GPU).
"""

import bisect
import collections
import functools
import gc
import itertools
import os
import sys
import time
import types

DEFAULT_SECONDS = 2.0

# Objects climbed per site: the leaked elements are alike, so a few of them
# lead to the same holder.
_CLIMB_SAMPLE_PER_SITE = 12
_CLIMB_SAMPLE_TOTAL = 96
_CLIMB_MAX_DEPTH = 10
_CLIMB_MAX_FRONTIER = 128
_ELEMENTS_KEPT_PER_SITE = 64
_GRAPH_NODES_PER_ROOT = 20000
_GRAPH_NODES_TOTAL = 400000
# A tensor whose graph holds this many earlier nodes of its own grad_fn's type
# is a carried state (a walk starts after 8 steps of growth, one node a step).
_CARRIED_STATE_RECURRENCES = 6
# A storage range is compared with at most this many requested ranges.
_OVERLAP_SCAN_LIMIT = 64

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED: a function body with fast locals

_CONTAINER_TYPES = (list, tuple, dict, set, frozenset, collections.deque)
# Objects that only relay a reference: climbing goes on above them.
_RELAY_TYPES = (types.CellType, types.FrameType, types.TracebackType, BaseException,
                types.MethodType, functools.partial)
_TRACEBACK_TYPES = (types.TracebackType, BaseException)
_GENERATOR_TYPES = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
_CALLABLE_TYPES = (types.FunctionType, types.MethodType, functools.partial)
_TENSOR, _MODULE, _CHECKPOINT = 1, 2, 3


def answer_request(request, seconds=DEFAULT_SECONDS):
    """The value of the `holder` annotation answering one holder request.

    `request` is the parsed request file (docs/python-protocol.md). Never
    raises: a failure becomes an `error` field next to whatever was found.
    """
    started = time.monotonic()
    answer = {"request_id": None, "seconds": 0.0, "sites": []}
    walk = None
    try:
        answer["request_id"] = request.get("request_id")
        walk = _Walk(started + float(seconds))
        answer["sites"] = walk.run(request.get("sites") or [])
        if walk.timed_out:
            answer["timed_out"] = True
    except Exception as error:  # the walk must never break the training job
        answer["error"] = "%s: %s" % (type(error).__name__, error)
    finally:
        if walk is not None:
            walk.release()
    answer["seconds"] = round(time.monotonic() - started, 3)
    return answer


class _Site:
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
        self.direct_matches = set()   # indices of ranges covered by a live tensor's storage
        self.graph_matches = set()    # indices covered by a tensor saved in a held graph
        self.direct_tensors = None    # covering tensors (a list the walk owns)
        self.graph_roots = None       # held tensors whose graph covers some range
        self.graph_carried = []       # chain lengths of the carried states that lead graph_roots
        self.graph_sizes = []         # saved tensors per graph, one entry per root
        self.answer = None
        self.candidates = []          # (kind, elements) to climb from, the likelier first


class _Ranges:
    """All requested ranges of all sites, sorted, for overlap queries."""

    def __init__(self, sites):
        entries = []
        for site_index, site in enumerate(sites):
            for range_index, (start, end) in enumerate(site.ranges):
                entries.append((start, end, site_index, range_index))
        entries.sort()
        self.starts = [e[0] for e in entries]
        self.ends = [e[1] for e in entries]
        self.owners = [(e[2], e[3]) for e in entries]
        self.longest = max((e[1] - e[0] for e in entries), default=0)

    def overlapping(self, low, high):
        """(site index, range index) of each requested range that overlaps [low, high)."""
        found = []
        i = bisect.bisect_left(self.starts, high) - 1
        scanned = 0
        while i >= 0 and scanned < _OVERLAP_SCAN_LIMIT and self.starts[i] + self.longest > low:
            if self.ends[i] > low:
                found.append(self.owners[i])
            i -= 1
            scanned += 1
        return found


class _TypeCategories(dict):
    """type -> _TENSOR, _MODULE, _CHECKPOINT or 0, computed on first sight of each type."""

    def __init__(self, tensor_type, module_type, checkpoint_frame_type):
        super().__init__()
        self.tensor_type = tensor_type
        self.module_type = module_type
        self.checkpoint_frame_type = checkpoint_frame_type

    def __missing__(self, kind):
        category = 0
        try:
            if issubclass(kind, self.tensor_type):
                category = _TENSOR
            elif self.module_type and issubclass(kind, self.module_type):
                category = _MODULE
            elif self.checkpoint_frame_type and issubclass(kind, self.checkpoint_frame_type):
                category = _CHECKPOINT
        except TypeError:
            pass
        self[kind] = category
        return category


class _Climb:
    """References found above some starting objects, by id (the objects live in _Walk.keep)."""

    def __init__(self):
        self.parents = {}   # id(child) -> [id(referrer), ...]
        self.cover = {}     # id(node) -> bitmask of the starting objects below it
        self.depth = {}     # id(node) -> level at which it was first seen
        self.traceback = {}  # id(node) -> True when a path below it passes a traceback
        self.order = []     # ids in the order they were found


class _Walk:
    def __init__(self, deadline):
        self.deadline = deadline
        self.timed_out = False
        self.torch = sys.modules.get("torch")
        # Containers the walk itself creates that refer to the program's
        # objects: gc.get_referrers must not report them as holders.
        self.own_ids = set()
        self.keep = self.own({})            # id -> object, for every object the walk looks at
        self.hook_callables = self.own([])  # (callable, label) of every registered module hook
        self.hook_dicts = {}                # id(hook dict) -> label
        self.module_dicts = {}              # id(module.__dict__) -> module name
        self.saved_names_by_type = {}
        self.checkpointing = False
        self.frame_locals = None            # id(value) -> (owner, name, function), on demand

    # ---- bookkeeping -------------------------------------------------

    def own(self, container):
        self.own_ids.add(id(container))
        return container

    def release(self):
        """Drops every reference to the program's objects."""
        self.keep.clear()
        del self.hook_callables[:]
        self.frame_locals = None

    def out_of_time(self):
        if not self.timed_out and time.monotonic() > self.deadline:
            self.timed_out = True
        return self.timed_out

    # ---- the walk ----------------------------------------------------

    def run(self, raw_sites):
        sites = [_Site(raw) for raw in raw_sites if isinstance(raw, dict)]
        if self.torch is None:
            return [_unmatched(site, "torch is not imported in this process") for site in sites]
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self.index_modules()
            ranges = _Ranges(sites)
            tensors = self.scan_heap()
            with _plain_tensor_methods(self.torch):
                self.match_tensors(tensors, ranges, sites)
                # Even when every address matched a live tensor: torch keeps the
                # Python object of a tensor saved for backward alive from C++,
                # so matching directly does not mean a Python holder exists.
                if any(site.ranges for site in sites):
                    self.match_graphs(tensors, ranges, sites)
                del tensors[:]
                for site in sites:
                    self.classify(site)
            self.find_holders(sites)
            return [site.answer for site in sites]
        finally:
            if gc_was_enabled:
                gc.enable()

    def index_modules(self):
        # __main__ first: multiprocessing also lists the main module as __mp_main__.
        names = sorted(sys.modules, key=lambda name: name != "__main__")
        for name in names:
            module = sys.modules.get(name)
            if _is(module, types.ModuleType):
                try:
                    self.module_dicts.setdefault(id(object.__getattribute__(module, "__dict__")),
                                                 name)
                except Exception:
                    continue

    def scan_heap(self):
        """Every live tensor; on the way, the hooks registered on modules."""
        torch = self.torch
        tensor_type = torch.Tensor
        module_type = getattr(getattr(torch, "nn", None), "Module", None) or ()
        checkpoint = sys.modules.get("torch.utils.checkpoint")
        checkpoint_frame_type = getattr(checkpoint, "_CheckpointFrame", None) or ()
        tensors = self.own([])
        modules = self.own([])
        # By type, not isinstance(): isinstance() falls back to obj.__class__,
        # which runs the __getattribute__ of any object that defines one. The
        # loop over every object of the heap runs in C (map, compress); Python
        # code runs once per distinct type.
        categories = _TypeCategories(tensor_type, module_type, checkpoint_frame_type)
        objects = gc.get_objects()
        try:
            selected = list(itertools.compress(objects, map(categories.__getitem__,
                                                            map(type, objects))))
        finally:
            del objects
        self.own(selected)
        for obj in selected:
            category = categories[type(obj)]
            if category == _TENSOR:
                tensors.append(obj)
            elif category == _MODULE:
                modules.append(obj)
            else:
                self.checkpointing = True
        del selected[:]
        for module in modules:
            self.index_hooks(_instance_dict(module), "hook on %s" % type(module).__name__)
        del modules[:]
        global_hooks = sys.modules.get("torch.nn.modules.module")
        if global_hooks is not None:
            self.index_hooks(_instance_dict(global_hooks), "global module hook")
        return tensors

    def index_hooks(self, namespace, label):
        if not namespace:
            return
        for attribute, hooks in list(namespace.items()):
            if not (_is(attribute, str) and attribute.endswith("hooks")
                    and _is(hooks, dict) and hooks):
                continue
            self.hook_dicts[id(hooks)] = label
            for hook in list(hooks.values()):
                # Since torch 2.0 a hook entry may be (hook, with_kwargs...) tuples.
                hook = hook[0] if _is(hook, tuple) and hook else hook
                self.hook_callables.append((hook, label))

    def storage_range(self, tensor):
        """[start, end) of the memory a tensor's storage owns, or None."""
        try:
            try:
                storage = tensor.untyped_storage()    # torch >= 2.0
            except AttributeError:
                storage = tensor.storage()            # torch 1.x (TypedStorage)
            start = storage.data_ptr()
            size = storage.nbytes()
        except Exception:  # sparse, meta, functorch wrappers...: no plain storage
            return None
        if not start or size <= 0:
            return None
        return start, start + size

    def match_tensors(self, tensors, ranges, sites):
        for count, tensor in enumerate(tensors):
            if count % 1024 == 0 and self.out_of_time():
                return
            span = self.storage_range(tensor)
            if span is None:
                continue
            for site_index, range_index in ranges.overlapping(*span):
                site = sites[site_index]
                if site.direct_tensors is None:
                    site.direct_tensors = self.own([])
                if len(site.direct_tensors) < _ELEMENTS_KEPT_PER_SITE and all(
                        t is not tensor for t in site.direct_tensors):
                    site.direct_tensors.append(tensor)
                site.direct_matches.add(range_index)

    # ---- autograd graphs ---------------------------------------------

    def match_graphs(self, tensors, ranges, sites):
        """Finds held tensors whose autograd graph saved tensors covering requested ranges.

        A tensor whose grad_fn lies inside the graph of another matching
        tensor is dropped: the outer one keeps it (torch keeps the Python
        object of a saved input alive from C++, so such inner tensors are
        live objects that no Python container holds) -- unless it is a
        carried state: its own graph holds earlier nodes made the same way as
        its grad_fn, step after step (an RNN hidden state fed back without
        detach; see _node_signature).
        That tensor is what chains the steps together, whatever else (the
        step's output) reaches it, so it comes first.
        """
        if self.checkpointing:
            # Reading a saved tensor of a non-reentrant checkpoint would
            # recompute its forward pass: leave those graphs alone.
            return
        roots = self.own([])       # (tensor, its grad_fn): keeping the node objects
        for tensor in tensors:     # alive keeps their ids stable during the walks
            node = _grad_fn(tensor)
            if node is not None:
                roots.append((tensor, node))
        root_node_ids = {id(node) for _, node in roots}
        inner_node_ids = set()
        matched = []               # (root index, saved count, {site index: {range index}})
        budget = [_GRAPH_NODES_TOTAL]
        carried = {}               # root index -> recurrences, for carried states
        for index, (tensor, node) in enumerate(roots):
            if budget[0] <= 0 or self.out_of_time():
                break
            recurrences = [0]
            saved_ranges = self.saved_tensor_ranges(node, budget, root_node_ids, inner_node_ids,
                                                    recurrences)
            if recurrences[0] >= _CARRIED_STATE_RECURRENCES:
                carried[index] = recurrences[0]
            hits_by_site = {}
            for low, high in saved_ranges:
                for site_index, range_index in ranges.overlapping(low, high):
                    hits_by_site.setdefault(site_index, set()).add(range_index)
            if hits_by_site:
                matched.append((index, len(saved_ranges), hits_by_site))
        for index, saved_count, hits_by_site in matched:
            tensor, node = roots[index]
            inner = id(node) in inner_node_ids and index not in carried
            for site_index, hits in hits_by_site.items():
                site = sites[site_index]
                site.graph_matches.update(hits)
                if inner:
                    continue
                if site.graph_roots is None:
                    site.graph_roots = self.own([])
                if index in carried:
                    # The newest carried state has the longest chain below it.
                    place = 0
                    while place < len(site.graph_carried) and \
                            site.graph_carried[place] >= carried[index]:
                        place += 1
                    site.graph_roots.insert(place, tensor)
                    site.graph_carried.insert(place, carried[index])
                    del site.graph_roots[_ELEMENTS_KEPT_PER_SITE:]
                elif len(site.graph_roots) < _ELEMENTS_KEPT_PER_SITE:
                    site.graph_roots.append(tensor)
                site.graph_sizes.append(saved_count)
        del roots[:]

    def saved_names(self, node):
        """Attributes of an autograd node that hold its saved tensors."""
        node_type = type(node)
        names = self.saved_names_by_type.get(node_type)
        if names is None:
            listed = dir(node_type)
            names = [n for n in listed if n.startswith("_saved_")]
            if "saved_tensors" in listed:  # nodes of custom autograd.Functions
                names.append("saved_tensors")
            self.saved_names_by_type[node_type] = names
        return names

    def saved_tensor_ranges(self, root, budget, root_node_ids=(), inner_node_ids=None,
                            recurrences=None):
        """Storage ranges of the activations saved in the graph below `root`.

        Leaves that require grad (parameters) are left out: they live as long
        as the model whatever the graph does. `recurrences[0]`, when given,
        is increased for each node below the root with the root's signature.
        """
        root_type = type(root)
        root_signature = _node_signature(root) if recurrences is not None else None
        tensor_type = self.torch.Tensor
        found = {}
        seen = {id(root): root}
        pending = [root]
        while pending and len(seen) <= _GRAPH_NODES_PER_ROOT and budget[0] > 0:
            node = pending.pop()
            budget[0] -= 1
            values = []
            for name in self.saved_names(node):
                try:
                    values.append(getattr(node, name))
                except Exception:  # freed by backward(), or modified in place
                    continue
            context = _instance_dict(node)
            if context:  # tensors a custom Function kept as ctx attributes
                values.extend(v for v in list(context.values()) if _is(v, tensor_type))
            for value in values:
                for saved in (value if _is(value, (list, tuple)) else (value,)):
                    if not _is(saved, tensor_type):
                        continue
                    try:
                        if saved.requires_grad and saved.is_leaf:
                            continue
                    except Exception:
                        continue
                    span = self.storage_range(saved)
                    if span is not None:
                        found[span[0]] = span[1]
            del values
            try:
                following = node.next_functions
            except Exception:
                continue
            for entry in following:
                child = entry[0]
                if child is not None and id(child) not in seen:
                    seen[id(child)] = child
                    pending.append(child)
                    if recurrences is not None and type(child) is root_type and \
                            _node_signature(child) == root_signature:
                        recurrences[0] += 1
                    if id(child) in root_node_ids:
                        inner_node_ids.add(id(child))
        return list(found.items())

    # ---- what each site is -------------------------------------------

    def classify(self, site):
        """Sets the site's answer skeleton and the candidate element sets to climb from.

        The kind that explains more addresses comes first; on a tie the
        tensors themselves, with the graph as the fallback when no Python
        reference holds them.
        """
        direct, graph = len(site.direct_matches), len(site.graph_matches)
        if direct == 0 and graph == 0:
            site.answer = _unmatched(site, "timed out before this site" if self.timed_out else None)
            return
        candidates = []
        if direct:
            candidates.append(("tensor", site.direct_tensors))
        if graph and site.graph_roots:
            candidates.insert(0 if graph > direct else len(candidates), ("graph", site.graph_roots))
        answer = _unmatched(site)
        answer["matched_addresses"] = len(site.direct_matches | site.graph_matches)
        site.answer = answer
        site.candidates = candidates
        if candidates:
            self.set_kind(site, *candidates[0])
        else:  # matched only through graphs held by nothing but other graphs
            answer["kind"] = "graph"
            answer["element_has_grad_fn"] = True

    def set_kind(self, site, kind, elements):
        answer = site.answer
        answer["kind"] = kind
        has_grad_fn = kind == "graph" or any(_grad_fn(t) is not None for t in elements)
        answer["element_has_grad_fn"] = has_grad_fn
        answer["graph_tensors_per_element"] = None
        if kind == "graph" and site.graph_sizes:
            answer["graph_tensors_per_element"] = _median(site.graph_sizes)
        elif has_grad_fn and not self.checkpointing:
            with _plain_tensor_methods(self.torch):
                sizes = [len(self.saved_tensor_ranges(_grad_fn(t), [2000])) for t in elements[:4]
                         if _grad_fn(t) is not None]
            if sizes:
                answer["graph_tensors_per_element"] = _median(sizes)

    # ---- climbing references -----------------------------------------

    def find_holders(self, sites):
        """Names the holder of each site's elements, with one climb shared by all sites."""
        sites = [site for site in sites if site.candidates]
        if not sites:
            return
        slots = sum(len(site.candidates) for site in sites)
        per_candidate = max(1, min(_CLIMB_SAMPLE_PER_SITE, _CLIMB_SAMPLE_TOTAL // slots))
        starts = self.own([])
        masks = {}  # (site index, candidate index) -> bits of its elements among starts
        for site_index, site in enumerate(sites):
            for candidate_index, (_, elements) in enumerate(site.candidates):
                mask = 0
                for element in elements[:per_candidate]:
                    mask |= 1 << len(starts)
                    starts.append(element)
                masks[site_index, candidate_index] = mask
        climb = self.climb(starts)
        unresolved = []
        for site_index, site in enumerate(sites):
            for candidate_index, (kind, elements) in enumerate(site.candidates):
                holder_key = self.choose_holder(climb, masks[site_index, candidate_index], elements)
                chain = self.chain_to_root(climb, holder_key)
                if chain is None and kind == "graph" and holder_key == id(elements[0]):
                    # No container gathers the roots and no name holds the
                    # first: the next root a name holds (of a carried state's
                    # node, the output that no variable keeps comes first as
                    # often as the state itself).
                    for element in elements[1:per_candidate]:
                        chain = self.chain_to_root(climb, id(element))
                        if chain is not None:
                            holder_key = id(element)
                            break
                if chain is not None:
                    self.set_kind(site, kind, elements)
                    self.finish(site, climb, holder_key, chain, elements)
                    break
            else:
                kind, elements = site.candidates[0]
                unresolved.append((site, kind, elements,
                                   self.choose_holder(climb, masks[site_index, 0], elements)))
        if unresolved and not self.timed_out:
            # Their roots may lie above where the first climb stopped: climb on from the holders.
            above = self.climb([self.keep[key] for _, _, _, key in unresolved])
            for site, kind, elements, holder_key in unresolved:
                chain = self.chain_to_root(above, holder_key)
                if chain is not None:
                    self.finish(site, above, holder_key, chain, elements)
        for site, _, _, _ in unresolved:
            if site.answer.get("holder") is None:
                site.answer["note"] = ("holder not found within the time budget" if self.timed_out
                                       else "no Python reference leads to a named holder")

    def finish(self, site, climb, holder_key, chain, elements):
        holder_obj = self.keep[holder_key]
        holder = self.describe(chain, holder_obj)
        through_traceback = climb.traceback.get(holder_key, False) or \
            holder["owner"] == "exception being handled"
        if through_traceback:
            holder["owner"] = "exception traceback"
        filled_by = self.hook_filling(holder_obj)
        if filled_by:
            holder["filled_by"] = filled_by
        answer = site.answer
        answer["holder"] = holder
        keys = [key for key, _ in _members(holder_obj)[:64]] if _is(holder_obj, dict) else []
        integer_keys = bool(keys) and all(_is(key, int) for key in keys)
        if _is(holder_obj, self.torch.Tensor):  # a tensor holds itself: judge that one
            scalar = _is_scalar(holder_obj)
        else:
            scalar = all(_is_scalar(t) for t in elements[:_CLIMB_SAMPLE_PER_SITE])
        answer["cause"], answer["fix"] = _cause_and_fix(
            holder, through_traceback, answer["element_has_grad_fn"], scalar, integer_keys)

    def is_root(self, obj):
        """True for objects that name what they hold; climbing stops there."""
        if _is(obj, dict):
            return id(obj) in self.module_dicts or id(obj) in self.hook_dicts
        if _is(obj, _CONTAINER_TYPES) or _is(obj, _RELAY_TYPES):
            return False
        return True  # instances, classes, functions, generators, modules

    def ignored(self, obj):
        if id(obj) in self.own_ids:
            return True
        if _is(obj, types.FrameType):
            return obj.f_code.co_filename.startswith(_PACKAGE_DIR)
        return False

    def climb(self, starts):
        """Follows referrers upward, level by level, from `starts` until roots.

        One gc.get_referrers call per level for all starting objects together.
        """
        result = _Climb()
        for index, obj in enumerate(starts):
            key = id(obj)
            self.keep[key] = obj
            result.cover[key] = result.cover.get(key, 0) | (1 << index)
            result.depth.setdefault(key, 0)
            result.traceback[key] = _is(obj, _TRACEBACK_TYPES)
            result.order.append(key)
        frontier = self.own(list(starts))
        for level in range(1, _CLIMB_MAX_DEPTH + 1):
            # The starting objects are climbed whatever they are; above them
            # climbing stops at roots.
            expandable = self.own([obj for obj in frontier if level == 1 or not self.is_root(obj)])
            if not expandable or self.out_of_time():
                break
            targets = self.own(tuple(expandable))
            target_ids = {id(obj) for obj in expandable}
            referrers = self.own(gc.get_referrers(*targets))
            next_frontier = self.own([])
            for referrer in referrers:
                if self.ignored(referrer):
                    continue
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
                    result.traceback[key] = _is(referrer, _TRACEBACK_TYPES)
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
            frontier = self.own(next_frontier[:_CLIMB_MAX_FRONTIER])
        return result

    def choose_holder(self, climb, sample_mask, elements):
        """The container that collects the most of the site's elements (the lowest on a tie).

        When no container gathers them, the first element is its own holder
        (a tensor kept by a global, an attribute or a local).
        """
        best_key, best_score = id(elements[0]), None
        for key in climb.order:
            covered = climb.cover.get(key, 0) & sample_mask
            if not covered:
                continue
            obj = self.keep[key]
            if not _is(obj, _CONTAINER_TYPES) or self.is_root(obj):
                continue
            if _is(obj, dict) and self.dict_owner(climb, key) is not None:
                continue  # an instance's __dict__: the attribute is named by its owner
            score = (bin(covered).count("1"), -climb.depth.get(key, 0))
            if best_score is None or score > best_score:
                best_key, best_score = key, score
        return best_key

    def dict_owner(self, climb, dict_key):
        """The instance or class whose namespace this dict is, if the climb saw it."""
        target = self.keep[dict_key]
        for parent_key in climb.parents.get(dict_key, ()):
            parent = self.keep.get(parent_key)
            if parent is not None and _is_namespace_of(parent, target):
                return parent
        return None

    def chain_to_root(self, climb, start_key):
        """Shortest chain [start, ..., root] upward to a named root, or None.

        The last element is the id of a root object, or a tuple
        ("frame", owner, variable, function) when the top object is a local
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
        """("frame", owner, variable, function) when obj is a local of a running frame."""
        if self.frame_locals is None:
            self.frame_locals = self.collect_frame_locals()
        found = self.frame_locals.get(id(obj))
        return None if found is None else ("frame",) + found

    def collect_frame_locals(self):
        """id(value) -> (owner, name, function) for the locals of every running frame.

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
                table.setdefault(id(handled), ("exception being handled", "sys.exc_info()", ""))
            handled = None
        except Exception:
            pass
        return table

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
            if code.co_filename.startswith(_PACKAGE_DIR) or not code.co_flags & _CO_OPTIMIZED:
                continue  # the walk itself; module bodies (their globals are the module's dict)
            function = getattr(code, "co_qualname", code.co_name)
            owner = "local of %s (%s:%d)" % (function, code.co_filename, code.co_firstlineno)
            try:
                snapshot = frame.f_locals
                items = list(snapshot.items())
                if snapshot_is_a_copy and type(snapshot) is dict:
                    snapshot.clear()
                snapshot = None
            except Exception:
                continue
            for name, value in items:
                table.setdefault(id(value), (owner, name, function))
            items = value = None
        frame = None

    # ---- naming --------------------------------------------------------

    def describe(self, chain, holder_obj):
        """The protocol's `holder` object for a chain [holder, ..., root]."""
        nodes = [self.keep[key] for key in reversed(chain[:-1])]  # top object first, holder last
        root = chain[-1]
        if isinstance(root, tuple):
            _, owner, variable, function = root
            name, consumed, prefix = variable, 1, function
        else:
            owner, name, consumed, prefix = self.name_below_root(self.keep[root], nodes)
        name += "".join(_segments(nodes, consumed))
        return {
            "type": _type_name(holder_obj),
            "name": name,
            "owner": owner,
            "path": "%s.%s" % (prefix, name) if prefix else name,
            "length": _length(holder_obj),
            "bounded": _deque_maxlen(holder_obj) is not None,
            "maxlen": _deque_maxlen(holder_obj),
        }

    def name_below_root(self, root, nodes):
        """(owner, variable, nodes consumed, path prefix) for how `root` holds nodes[0]."""
        child = nodes[0]
        below = nodes[1] if len(nodes) > 1 else None
        if _is(root, dict) and id(root) in self.module_dicts:
            module = self.module_dicts[id(root)]
            return "module %s" % module, _key_text(root, child, bare=True), 1, module
        if _is(root, dict):  # a module's hook dict
            label = self.hook_dicts.get(id(root), "hook")
            name = child.__qualname__ if _is(child, types.FunctionType) else _type_name(child)
            return label, name, 1, ""
        if _is(root, types.FunctionType):
            owner = self.hook_label(root) or "closure of %s" % root.__qualname__
            variable = _function_slot(root, child, below)
            consumed = 2 if variable and below is not None else 1
            return owner, variable or "?", consumed, root.__qualname__
        if _is(root, _GENERATOR_TYPES):
            frame = _first_attribute(root, ("gi_frame", "cr_frame", "ag_frame"))
            code = _first_attribute(root, ("gi_code", "cr_code", "ag_code"))
            where = root.__qualname__
            if code is not None:
                where = "%s (%s:%d)" % (where, code.co_filename, code.co_firstlineno)
            variable = _local_name(frame, child) if frame is not None else None
            return "local of %s" % where, variable or "?", 1, root.__qualname__
        if _is(root, type):
            variable, consumed = _attribute(root, child, below)
            return "attribute of class %s" % root.__name__, variable, consumed, root.__name__
        variable, consumed = _attribute(root, child, below)
        owner_type = type(root).__name__
        return "attribute of %s" % owner_type, variable, consumed, owner_type

    def hook_label(self, function):
        for hook, label in self.hook_callables:
            if hook is function or (_is(hook, types.MethodType) and hook.__func__ is function):
                return label
        return None

    def hook_filling(self, holder):
        """The hook's label when a registered module hook can reach `holder`.

        A hook reaches it through its closure, an attribute of the instance it
        is bound to, a functools.partial argument, or a global name it uses.
        """
        for hook, label in self.hook_callables:
            if not _is(hook, _CALLABLE_TYPES):
                continue
            try:
                function = hook
                if _is(hook, functools.partial):
                    if any(a is holder for a in hook.args) or \
                            any(v is holder for v in (hook.keywords or {}).values()):
                        return label
                    function = hook.func
                if _is(function, types.MethodType):
                    namespace = _instance_dict(function.__self__) or {}
                    if any(v is holder for v in list(namespace.values())):
                        return label
                    function = function.__func__
                if not _is(function, types.FunctionType):
                    continue
                for cell in function.__closure__ or ():
                    try:
                        if cell.cell_contents is holder:
                            return label
                    except ValueError:  # an empty cell
                        continue
                module_globals = function.__globals__
                if any(module_globals.get(name) is holder for name in function.__code__.co_names):
                    return label
            except Exception:
                continue
        return None


# ---- small helpers (no state) ------------------------------------------

def _unmatched(site, note=None):
    answer = {"site_id": site.site_id, "matched_addresses": 0, "kind": "unknown",
              "holder": None, "graph_tensors_per_element": None,
              "element_has_grad_fn": False, "fix": None}
    if note:
        answer["note"] = note
    return answer


def _node_signature(node):
    """How an autograd node was made: its type and, per input, the input's node
    type and output slot -- or, for a parameter, the parameter itself.

    Two nodes with one signature did the same operation on the same kind of
    inputs with the same weights: the same line of a model in two steps. A
    linear layer applied to the hidden state differs from the GRU's own
    hidden-to-hidden product by its weights, so only a truly carried state
    finds its signature again and again below itself.
    """
    try:
        inputs = node.next_functions
    except Exception:
        return (type(node), None)
    parts = []
    for entry in inputs:
        child = entry[0]
        if child is None:
            parts.append(None)
        elif type(child).__name__ == "AccumulateGrad":
            # The wrapper object is remade on each visit; the parameter is not.
            try:
                parts.append(id(child.variable))
            except Exception:
                parts.append(type(child))
        else:
            parts.append((type(child), entry[1]))
    return (type(node), tuple(parts))


def _grad_fn(tensor):
    try:
        return tensor.grad_fn
    except Exception:
        return None


def _is_scalar(tensor):
    try:
        return tensor.numel() == 1
    except Exception:
        return False


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _is(obj, classes):
    """isinstance() by the object's real type: never runs the object's own code."""
    return issubclass(type(obj), classes)


class _plain_tensor_methods:
    """Calls tensor methods without the __torch_function__ of tensor subclasses."""

    def __init__(self, torch):
        disable = getattr(torch._C, "DisableTorchFunctionSubclass", None) or \
            getattr(torch._C, "DisableTorchFunction", None)
        self.context = disable() if disable is not None else None

    def __enter__(self):
        if self.context is not None:
            self.context.__enter__()

    def __exit__(self, *error):
        if self.context is not None:
            self.context.__exit__(*error)
        return False


def _members(container):
    """(key, value) pairs of a builtin container or subclass, read through the builtin type.

    A subclass may override items() or __iter__; the builtin methods read
    what the object really stores without running that code.
    """
    try:
        if _is(container, dict):
            return list(dict.items(container))
        if _is(container, list):
            return list(enumerate(list.copy(container)))
        if _is(container, tuple):
            return list(enumerate(tuple.__getitem__(container, slice(None))))
        if _is(container, collections.deque):
            return list(enumerate(collections.deque.__iter__(container)))
        if _is(container, set):
            return [(None, v) for v in set.__iter__(container)]
        if _is(container, frozenset):
            return [(None, v) for v in frozenset.__iter__(container)]
    except Exception:
        pass
    return []


def _deque_maxlen(obj):
    if not _is(obj, collections.deque):
        return None
    return collections.deque.maxlen.__get__(obj)


def _first_attribute(obj, names):
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _instance_dict(obj):
    """obj.__dict__ without running the object's own __getattribute__/__getattr__, or None."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        return None
    return namespace if _is(namespace, dict) else None


def _is_namespace_of(owner, d):
    """True when `d` is the __dict__ of instance `owner` or the namespace of class `owner`."""
    if _is(owner, type):
        return any(r is d for r in gc.get_referents(owner))
    return _instance_dict(owner) is d


def _type_name(obj):
    kind = type(obj)
    module = kind.__dict__.get("__module__")
    if _is(module, str) and module.startswith("torch") and (
            "Tensor" in kind.__name__ or kind.__name__ == "Parameter"):
        return "Tensor"
    return kind.__name__


def _length(obj):
    if not _is(obj, _CONTAINER_TYPES):
        return None
    for base in (dict, list, tuple, collections.deque, set, frozenset):
        if _is(obj, base):
            return base.__len__(obj)
    return None


def _key_text(d, child, bare=False):
    members = _members(d)
    for key, value in members:
        if value is child:
            return _format_key(key, bare)
    for key, _ in members:
        if key is child:
            return "<key %s>" % _format_key(key, False)
    return "?"


def _format_key(key, bare):
    if type(key) is str:
        return key if bare else repr(key)
    if type(key) in (int, float, bool) or key is None:
        return repr(key)
    return "<%s>" % type(key).__name__


def _index_text(sequence, child):
    for index, value in _members(sequence):
        if value is child:
            return str(index)
    return "?"


def _segments(nodes, start):
    """Subscripts for each edge nodes[i-1] -> nodes[i], i >= start: ['loss'], [3]."""
    text = []
    for index in range(max(start, 1), len(nodes)):
        parent, child = nodes[index - 1], nodes[index]
        if _is(parent, dict):
            text.append("[%s]" % _key_text(parent, child))
        elif _is(parent, (list, tuple, collections.deque)):
            text.append("[%s]" % _index_text(parent, child))
        elif _is(parent, (set, frozenset)):
            text.append("{...}")
        elif _is(parent, types.FrameType):
            text.append(".<local %s>" % (_local_name(parent, child) or "?"))
        # cells, tracebacks, exceptions, bound methods and partials only relay
    return text


def _attribute(owner, child, below):
    """(attribute name, nodes consumed) for how instance or class `owner` holds `child`.

    `child` is either owner's namespace dict, in which case the attribute
    holds `below`, or the value itself (slots, inline values).
    """
    if below is not None and _is(child, dict) and _is_namespace_of(owner, child):
        return _key_text(child, below, bare=True), 2
    try:
        if _is(owner, type):
            namespace = dict(type.__getattribute__(owner, "__dict__"))
        else:
            namespace = _instance_dict(owner) or {}
        for name, value in _members(namespace):
            if value is child:
                return name, 1
    except Exception:
        pass
    return "?", 1


def _function_slot(function, child, below):
    """The name under which a function holds `below`: a closure variable or a default."""
    code = function.__code__
    if child is function.__closure__:
        for index, cell in enumerate(child or ()):
            if cell is below and index < len(code.co_freevars):
                return code.co_freevars[index]
    if child is function.__defaults__ and below is not None:
        positional = code.co_varnames[:code.co_argcount]
        defaults = function.__defaults__ or ()
        for offset, value in enumerate(defaults):
            if value is below:
                return positional[len(positional) - len(defaults) + offset]
    return None


def _local_name(frame, child):
    """The local of a frame kept by a traceback or a suspended generator that holds child."""
    try:
        snapshot = frame.f_locals
        items = list(snapshot.items())
        if sys.version_info < (3, 13) and type(snapshot) is dict and \
                frame.f_code.co_flags & _CO_OPTIMIZED:
            snapshot.clear()  # see collect_frame_locals: the snapshot would outlive this walk
    except Exception:
        return None
    for name, value in items:
        if value is child:
            return name
    return None


def _cause_and_fix(holder, through_traceback, has_grad_fn, scalar, integer_keys):
    """A short cause token and the fix a person should apply."""
    kind, name = holder["type"], holder["name"] or "it"
    filled_by = holder.get("filled_by")
    container = holder["length"] is not None
    if through_traceback:
        return ("exception-traceback",
                "don't keep the exception or its traceback (it keeps every local of the frames it "
                "passed through); keep str(e) or traceback.format_exc() instead")
    if filled_by:
        return ("forward-hook",
                "the %s stores tensors in %s: store .detach() (or .detach().cpu()) and clear %s "
                "each step, or remove the hook when done" % (filled_by, name, name))
    if holder["bounded"]:
        return ("bounded-container",
                "bounded by maxlen=%s: growth stops at %s elements; lower maxlen or store "
                ".detach().cpu() copies if that is too much" % (holder["maxlen"], holder["maxlen"]))
    if integer_keys and kind in ("dict", "OrderedDict", "defaultdict"):
        return ("cache-by-step",
                "bound the cache %s (drop old steps) or store .detach().cpu() copies in it" % name)
    if has_grad_fn and container:
        if scalar:
            return ("graph-in-container",
                    "append loss.item() (a Python float) instead of the loss tensor: each tensor "
                    "in %s keeps its step's autograd graph alive" % name)
        return ("graph-in-container",
                "detach() before storing (.detach(), or .detach().cpu()), or compute it under "
                "torch.no_grad() if it is not trained on: each tensor in %s keeps its step's "
                "autograd graph alive" % name)
    if has_grad_fn:
        # One tensor whose graph reaches back over many steps: a sum
        # (`total += loss`, a scalar) or a state carried into the next step
        # (an RNN's hidden state without detach(), not a scalar). The graph
        # looks the same either way, so the likelier fix comes first.
        if scalar:
            return ("graph-accumulated",
                    "%s chains every step's autograd graph: accumulate loss.item() (or "
                    "loss.detach()) instead of the tensor, or detach() a state that is carried "
                    "into the next step" % name)
        return ("graph-accumulated",
                "%s chains every step's autograd graph: detach() it where it is carried into "
                "the next step (%s = %s.detach(), as truncated backpropagation does), or, if "
                "it is a running sum, accumulate .item() instead" % (name, name, name))
    if container:
        return ("tensor-container",
                "store .cpu() copies (or .item() for scalars) in %s, or clear it periodically"
                % name)
    return ("single-reference",
            "drop the reference (del %s, or reassign it) when the tensor is no longer needed" % name)
