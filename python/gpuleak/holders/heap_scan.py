"""Heap scan: every live tensor, the hooks registered on modules, and which
requested address ranges each tensor's storage covers.

The loop over every object of the heap runs in C (map, compress) and picks
objects by type, not isinstance(): isinstance() falls back to obj.__class__,
which runs the __getattribute__ of any object that defines one. Python code
runs once per distinct type.
"""

import bisect
import gc
import itertools
import sys
import types

from gpuleak.holders.object_reads import instance_dict, is_a

_TENSOR, _MODULE, _CHECKPOINT, _OPTIMIZER = 1, 2, 3, 4
ELEMENTS_KEPT_PER_SITE = 64
# A storage range is compared with at most this many requested ranges.
_OVERLAP_SCAN_LIMIT = 64


class Ranges:
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
    """type -> _TENSOR, _MODULE, _CHECKPOINT, _OPTIMIZER or 0, computed on first sight of each type."""

    def __init__(self, tensor_type, module_type, checkpoint_frame_type, optimizer_type):
        super().__init__()
        self.tensor_type = tensor_type
        self.module_type = module_type
        self.checkpoint_frame_type = checkpoint_frame_type
        self.optimizer_type = optimizer_type

    def __missing__(self, kind):
        category = 0
        try:
            if issubclass(kind, self.tensor_type):
                category = _TENSOR
            elif self.module_type and issubclass(kind, self.module_type):
                category = _MODULE
            elif self.checkpoint_frame_type and issubclass(kind, self.checkpoint_frame_type):
                category = _CHECKPOINT
            elif self.optimizer_type and issubclass(kind, self.optimizer_type):
                category = _OPTIMIZER
        except TypeError:
            pass
        self[kind] = category
        return category


def storage_range(tensor):
    """[start, end) of the memory a tensor's storage owns, or None."""
    try:
        try:
            storage = tensor.untyped_storage()  # torch >= 2.0
        except AttributeError:
            storage = tensor.storage()  # torch 1.x (TypedStorage)
        start = storage.data_ptr()
        size = storage.nbytes()
    except Exception:  # sparse, meta, functorch wrappers...: no plain storage
        return None
    if not start or size <= 0:
        return None
    return start, start + size


class HeapScan:
    """The heap-scan part of the walk (state lives in walk.Walk)."""

    def index_modules(self):
        # __main__ first: multiprocessing also lists the main module as __mp_main__.
        names = sorted(sys.modules, key=lambda name: name != "__main__")
        for name in names:
            module = sys.modules.get(name)
            if is_a(module, types.ModuleType):
                try:
                    self.module_dicts.setdefault(id(object.__getattribute__(module, "__dict__")), name)
                except Exception:
                    continue

    def scan_heap(self):
        """Every live tensor; on the way, the hooks registered on modules and the optimizers."""
        torch = self.torch
        tensor_type = torch.Tensor
        module_type = getattr(getattr(torch, "nn", None), "Module", None) or ()
        checkpoint = sys.modules.get("torch.utils.checkpoint")
        checkpoint_frame_type = getattr(checkpoint, "_CheckpointFrame", None) or ()
        optimizer_type = getattr(getattr(torch, "optim", None), "Optimizer", None) or ()
        tensors = self.own([])
        modules = self.own([])
        categories = _TypeCategories(tensor_type, module_type, checkpoint_frame_type, optimizer_type)
        objects = gc.get_objects()
        try:
            selected = list(itertools.compress(objects, map(categories.__getitem__, map(type, objects))))
        finally:
            del objects
        self.own(selected)
        for obj in selected:
            category = categories[type(obj)]
            if category == _TENSOR:
                tensors.append(obj)
            elif category == _MODULE:
                modules.append(obj)
            elif category == _OPTIMIZER:
                self.index_optimizer(obj)
            else:
                self.checkpointing = True
        del selected[:]
        for module in modules:
            namespace = instance_dict(module)
            self.index_hooks(namespace, "hook on %s" % type(module).__name__)
            self.index_module_slots(module, namespace)
        del modules[:]
        global_hooks = sys.modules.get("torch.nn.modules.module")
        if global_hooks is not None:
            self.index_hooks(instance_dict(global_hooks), "global module hook")
        return tensors

    def index_hooks(self, namespace, label):
        if not namespace:
            return
        for attribute, hooks in list(namespace.items()):
            if not (is_a(attribute, str) and attribute.endswith("hooks") and is_a(hooks, dict) and hooks):
                continue
            self.hook_dicts[id(hooks)] = (label, attribute)
            for hook in list(hooks.values()):
                # Since torch 2.0 a hook entry may be (hook, with_kwargs...) tuples.
                hook = hook[0] if is_a(hook, tuple) and hook else hook
                self.hook_callables.append((hook, label))

    def index_module_slots(self, module, namespace):
        """A module's _buffers / _parameters / _modules dicts, so that names say 'buffer of X'."""
        if not namespace:
            return
        for attribute, role in (("_buffers", "buffer"), ("_parameters", "parameter"), ("_modules", "submodule")):
            slots = namespace.get(attribute)
            if is_a(slots, dict):
                self.module_slots[id(slots)] = (role, type(module).__name__)

    def index_optimizer(self, optimizer):
        namespace = instance_dict(optimizer)
        state = namespace.get("state") if namespace else None
        if is_a(state, dict):
            self.optimizer_states[id(state)] = type(optimizer).__name__

    def match_tensors(self, tensors, ranges, sites, span_of=storage_range):
        for count, tensor in enumerate(tensors):
            if count % 1024 == 0 and self.out_of_time():
                return
            span = span_of(tensor)
            if span is None:
                continue
            for site_index, range_index in ranges.overlapping(*span):
                site = sites[site_index]
                if site.direct_tensors is None:
                    site.direct_tensors = self.own([])
                if len(site.direct_tensors) < ELEMENTS_KEPT_PER_SITE and all(
                    t is not tensor for t in site.direct_tensors
                ):
                    site.direct_tensors.append(tensor)
                site.direct_matches.add(range_index)
