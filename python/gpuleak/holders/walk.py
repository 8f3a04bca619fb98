"""One holder walk: the state shared by its parts and the order they run in.

    heap scan -> tensors matched (heap_scan) -> graphs matched (graph_walk)
    -> kinds and candidates -> referrer climb (referrer_climb) -> naming
    (naming) -> keeping statement (keeping_statement) -> cause and fix
    (diagnosis)

The walk holds every object it looks at in `keep` (by id) while it runs and
drops them all in release(); containers it makes itself are listed in
`own_ids` so that gc.get_referrers never reports them as holders.
"""

import contextlib
import gc
import os
import sys
import time
import types

from gpuleak.holders.diagnosis import (
    LIBRARY_HANDOVER_CALLS,
    array_framework_fact,
    cause_and_fix,
    owning_library,
    view_of_larger_base,
)
from gpuleak.holders.graph_walk import GraphWalk, grad_fn, is_scalar, median, plain_tensor_methods
from gpuleak.holders.array_scan import array_range, array_types, live_arrays
from gpuleak.holders.heap_scan import HeapScan, Ranges, storage_range
from gpuleak.holders.keeping_statement import KeepingStatements, is_library_file
from gpuleak.holders.naming import Naming
from gpuleak.holders.object_reads import LRU_CACHE_TYPE, is_a, members
from gpuleak.holders.referrer_climb import (
    CLIMB_SAMPLE_PER_SITE,
    CLIMB_SAMPLE_TOTAL,
    FINISHED_FRAME_OWNER,
    ReferrerClimb,
)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def unmatched(site, note=None):
    answer = {
        "site_id": site.site_id,
        "matched_addresses": 0,
        "kind": "unknown",
        "holder": None,
        "graph_tensors_per_element": None,
        "element_has_grad_fn": False,
        "fix": None,
    }
    if note:
        answer["note"] = note
    return answer


class Walk(HeapScan, GraphWalk, ReferrerClimb, Naming):
    def __init__(self, deadline):
        self.deadline = deadline
        self.timed_out = False
        self.torch = sys.modules.get("torch")
        self.package_dir = _PACKAGE_DIR
        self.own_ids = set()
        self.keep = self.own({})  # id -> object, for every object the walk looks at
        self.hook_callables = self.own([])  # (callable, label) of every registered module hook
        self.hook_dicts = {}  # id(hook dict) -> (label, attribute name)
        self.module_dicts = {}  # id(module.__dict__) -> module name
        self.module_slots = {}  # id(module._buffers etc.) -> (role, module type)
        self.optimizer_states = {}  # id(optimizer.state) -> optimizer type
        self.saved_names_by_type = {}
        self.checkpointing = False
        self.grad_owners = None  # id(leaf.grad) -> leaf (index_gradients)
        self.frame_locals = None  # id(value) -> (owner, name, function, code)
        self.user_code = self.own([])  # code objects of the program's running frames
        self.statements = None

    # ---- bookkeeping -------------------------------------------------

    def own(self, container):
        self.own_ids.add(id(container))
        return container

    def release(self):
        """Drops every reference to the program's objects."""
        self.keep.clear()
        self.grad_owners = None
        del self.hook_callables[:]
        del self.user_code[:]
        self.frame_locals = None

    def out_of_time(self):
        if not self.timed_out and time.monotonic() > self.deadline:
            self.timed_out = True
        return self.timed_out

    # ---- the walk ----------------------------------------------------

    def run(self, sites):
        array_kinds = None
        if self.torch is None:  # CuPy's or JAX's arrays stand for tensors
            array_kinds = array_types()
            if not array_kinds:
                return [unmatched(site, "neither torch nor CuPy nor JAX is imported in this process") for site in sites]
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self.index_modules()
            ranges = Ranges(sites)
            with self.plain_methods():
                if array_kinds is None:
                    self.match_torch(ranges, sites)
                else:
                    arrays = self.own(live_arrays(array_kinds))
                    self.match_tensors(arrays, ranges, sites, span_of=array_range)
                    del arrays[:]
                for site in sites:
                    self.classify(site)
            self.find_holders(sites)
            return [site.answer for site in sites]
        finally:
            if gc_was_enabled:
                gc.enable()

    def plain_methods(self):
        """plain_tensor_methods for torch; nothing to switch off for CuPy's and JAX's arrays."""
        return plain_tensor_methods(self.torch) if self.torch is not None else contextlib.nullcontext()

    def match_torch(self, ranges, sites):
        tensors = self.scan_heap()
        self.index_gradients(tensors)
        self.match_tensors(tensors, ranges, sites)
        # Even when every address matched a live tensor: torch keeps the
        # Python object of a tensor saved for backward alive from C++,
        # so matching directly does not mean a Python holder exists.
        if any(site.ranges for site in sites):
            self.match_graphs(tensors, ranges, sites)
        self.match_grad_cycles(tensors, ranges, sites)
        del tensors[:]

    def index_gradients(self, tensors):
        """id(leaf.grad) -> leaf, for the climb: a gradient's only holder is its leaf, in C++."""
        owners = self.own({})
        for count, tensor in enumerate(tensors):
            if count % 1024 == 0 and self.out_of_time():
                break
            try:
                if not tensor.is_leaf:
                    continue
                gradient = tensor.grad
            except Exception:
                continue
            if gradient is not None:
                owners[id(gradient)] = tensor
        self.grad_owners = owners

    def match_grad_cycles(self, tensors, ranges, sites):
        """Leaves in a backward(create_graph=True) cycle whose memory covers requested ranges."""
        for tensor in tensors:
            if self.out_of_time():
                return
            if not self.in_grad_cycle(tensor):
                continue
            spans = self.saved_tensor_ranges(grad_fn(tensor.grad), [2000])
            for candidate in (tensor, tensor.grad):
                span = storage_range(candidate)
                if span is not None:
                    spans.append(span)
            for low, high in spans:
                for site_index, range_index in ranges.overlapping(low, high):
                    site = sites[site_index]
                    if site.cycle_leaves is None:
                        site.cycle_leaves = self.own([])
                    if all(t is not tensor for t in site.cycle_leaves):
                        site.cycle_leaves.append(tensor)
                    site.cycle_matches.add(range_index)

    # ---- what each site is -------------------------------------------

    def classify(self, site):
        """Sets the site's answer skeleton and the candidate element sets to climb from.

        The kind that explains more addresses comes first; on a tie the
        tensors themselves, with the graph as the fallback when no Python
        reference holds them.
        """
        direct, graph = len(site.direct_matches), len(site.graph_matches)
        if direct == 0 and graph == 0 and not site.cycle_matches:
            site.answer = unmatched(site, "timed out before this site" if self.timed_out else None)
            return
        candidates = []
        if direct:
            candidates.append(("tensor", site.direct_tensors))
        if graph and site.graph_roots:
            candidates.insert(0 if graph > direct else len(candidates), ("graph", site.graph_roots))
        answer = unmatched(site)
        answer["matched_addresses"] = len(site.direct_matches | site.graph_matches | site.cycle_matches)
        site.answer = answer
        site.candidates = candidates
        if candidates:
            self.set_kind(site, *candidates[0])
        else:  # matched only through graphs held by nothing but other graphs, or a cycle
            answer["kind"] = "graph"
            answer["element_has_grad_fn"] = True

    def set_kind(self, site, kind, elements):
        answer = site.answer
        answer["kind"] = kind
        # Most of the elements, not any one: the walk runs during a step, when that step's
        # own tensor (a model's logits with their graph, held by a local) covers the same
        # site as what the holder keeps (detached slices of earlier steps' logits).
        with_graph = sum(1 for t in elements if grad_fn(t) is not None)
        has_grad_fn = kind == "graph" or 2 * with_graph > len(elements)
        answer["element_has_grad_fn"] = has_grad_fn
        answer["graph_tensors_per_element"] = None
        if kind == "graph" and site.graph_sizes:
            answer["graph_tensors_per_element"] = median(site.graph_sizes) or None
        elif has_grad_fn and not self.checkpointing:
            with plain_tensor_methods(self.torch):
                sizes = [
                    len(self.saved_tensor_ranges(grad_fn(t), [2000])) for t in elements[:4] if grad_fn(t) is not None
                ]
            if sizes and median(sizes) > 0:
                answer["graph_tensors_per_element"] = median(sizes)

    # ---- climbing references -----------------------------------------

    def find_holders(self, sites):
        """Names the holder of each site's elements, with one climb shared by all sites."""
        self.statements = KeepingStatements(self.user_files())
        climbing = [site for site in sites if site.candidates]
        unresolved = []
        if climbing:
            unresolved = self.climb_and_name(climbing)
        for site in sites:
            if site.answer is not None and site.answer.get("holder") is None and site.cycle_leaves:
                self.name_cycle(site)
        for site, _, _, _ in unresolved:
            if site.answer.get("holder") is None:
                site.answer["note"] = (
                    "holder not found within the time budget"
                    if self.timed_out
                    else "no Python reference leads to a named holder"
                )

    def climb_and_name(self, sites):
        slots = sum(len(site.candidates) for site in sites)
        per_candidate = max(1, min(CLIMB_SAMPLE_PER_SITE, CLIMB_SAMPLE_TOTAL // slots))
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
                if site.cycle_leaves:
                    continue  # named by name_cycle
                kind, elements = site.candidates[0]
                unresolved.append((site, kind, elements, self.choose_holder(climb, masks[site_index, 0], elements)))
        if unresolved and not self.timed_out:
            # Their roots may lie above where the first climb stopped: climb on from the holders.
            above = self.climb([self.keep[key] for _, _, _, key in unresolved])
            for site, kind, elements, holder_key in unresolved:
                chain = self.chain_to_root(above, holder_key)
                if chain is not None:
                    self.finish(site, above, holder_key, chain, elements)
        return unresolved

    def user_files(self):
        """The program's own source files: __main__'s and those of its running frames."""
        files = []
        main = sys.modules.get("__main__")
        path = getattr(main, "__file__", None)
        if path:
            files.append(os.path.abspath(path))
        if self.frame_locals is None:
            self.frame_locals = self.collect_frame_locals()
        for code in self.user_code:
            if not is_library_file(code.co_filename):
                files.append(code.co_filename)
        return files

    # ---- naming the holder --------------------------------------------

    def finish(self, site, climb, holder_key, chain, elements):
        holder_obj = self.keep[holder_key]
        holder = self.describe(chain, holder_obj)
        through_traceback = (
            climb.traceback.get(holder_key, False)
            or holder["owner"] == "exception being handled"
            or holder["owner"].endswith(FINISHED_FRAME_OWNER)
        )
        facts = set()
        if is_a(holder_obj, dict) and id(holder_obj) in self.hook_dicts:
            facts.add("hook-dict")
        if is_a(holder_obj, LRU_CACHE_TYPE):
            facts.add("lru-cache")
        if is_a(holder_obj, dict) and id(holder_obj) in self.optimizer_states:
            facts.add("optimizer-state")
        if holder["owner"].startswith("buffer of"):
            facts.add("buffer")
        if self.holds_cuda_graphs(holder_obj):
            facts.add("cuda-graph")
        framework = array_framework_fact(elements[:CLIMB_SAMPLE_PER_SITE])
        if framework:
            facts.add(framework)
        for element in elements[:CLIMB_SAMPLE_PER_SITE]:
            element_text = self.element_text(climb, id(element), holder_key)
            if element_text:
                holder["element"] = element_text
                break
        owners = [self.keep[key] for key in chain[1:-1]]
        if not isinstance(chain[-1], tuple):
            owners.append(self.keep[chain[-1]])
        library = owning_library(owners[:6])
        self.statements.allocation_lines = site.lines
        kept_at = self.keeping_statement(chain, holder_obj, holder)
        if kept_at is None and library is not None:
            # Stored by the library's own code: the user's line is the call that handed
            # the objects over (accelerator.prepare(...), metric.update(...)).
            kept_at = self.statements.calls(LIBRARY_HANDOVER_CALLS.get(library[0], ()))
            if kept_at is not None:
                kept_at["kind"] = "library-call"
        if kept_at is not None:
            holder["kept_at"] = kept_at
            if kept_at.get("kind") == "self-assignment" and holder["type"] == "Tensor":
                facts.add("grows-by-concatenation")
        if through_traceback:
            holder["held_in"] = holder["owner"]
            holder["owner"] = "exception traceback"
        filled_by = self.hook_filling(holder_obj)
        if filled_by:
            holder["filled_by"] = filled_by
        answer = site.answer
        answer["holder"] = holder
        keys = [key for key, _ in members(holder_obj)[:64]] if is_a(holder_obj, dict) else []
        integer_keys = bool(keys) and all(is_a(key, int) for key in keys)
        if self.torch is not None and is_a(holder_obj, self.torch.Tensor):
            judged = [holder_obj]  # a tensor holds itself: judge that one
        else:
            judged = elements[:CLIMB_SAMPLE_PER_SITE]
        scalar = all(is_scalar(t) for t in judged)
        view = view_of_larger_base(judged)
        if view is not None:
            answer["view"] = {"bytes": view[0], "base_bytes": view[1]}
        answer["cause"], answer["fix"] = cause_and_fix(
            holder, through_traceback, answer["element_has_grad_fn"], scalar, integer_keys, facts, view, library
        )

    def holds_cuda_graphs(self, holder_obj):
        cuda = getattr(self.torch, "cuda", None)
        graph_type = getattr(cuda, "CUDAGraph", None) if cuda is not None else None
        if graph_type is None:
            return False
        for _, value in members(holder_obj)[:16]:
            if is_a(value, graph_type) or any(is_a(v, graph_type) for _, v in members(value)[:8]):
                return True
        return False

    def keeping_statement(self, chain, holder_obj, holder):
        """The statement that stores into the holder, from the source of its owner; or None."""
        try:
            return self.find_keeping_statement(chain, holder_obj, holder)
        except Exception:  # a source the analysis cannot read must not cost the holder
            return None

    def find_keeping_statement(self, chain, holder_obj, holder):
        statements = self.statements
        if is_a(holder_obj, LRU_CACHE_TYPE):
            return statements.decorator(getattr(holder_obj, "__wrapped__", None))
        if is_a(holder_obj, dict) and id(holder_obj) in self.hook_dicts:
            return statements.hook_registration(self.hook_dicts[id(holder_obj)][1])
        root = chain[-1]
        name = holder["name"]
        found = None
        if isinstance(root, tuple):
            code = root[4] if len(root) > 4 else None
            found = statements.in_function(code, name) if code is not None else None
        else:
            root_obj = self.keep[root]
            if is_a(root_obj, dict) and id(root_obj) in self.module_dicts:
                found = statements.in_module(self.module_dicts[id(root_obj)], name)
            elif is_a(root_obj, types.FunctionType):
                found = statements.in_closure(root_obj, name)
                if (found is None or found["kind"] == "assignment") and self.hook_label(root_obj):
                    found = statements.hook_registration("_forward_hooks") or found
            elif is_a(root_obj, type):
                found = statements.for_attribute(root_obj, name.split("[", 1)[0])
            else:
                found = statements.for_attribute(type(root_obj), name.split("[", 1)[0])
        return found

    def name_cycle(self, site):
        """The holder of memory kept by an autograd reference cycle on a leaf."""
        leaf = site.cycle_leaves[0]
        kept_at = None
        try:
            kept_at = self.statements.backward_with_create_graph()
        except Exception:
            pass
        names = []
        try:
            names = self.statements.leaf_names()
        except Exception:
            pass
        name = names[0] if len(names) == 1 else "leaf tensor"
        try:
            shape = "x".join(str(d) for d in leaf.shape)
        except Exception:
            shape = "?"
        holder = {
            "type": "Tensor",
            "name": name,
            "owner": "autograd reference cycle",
            "path": name,
            "length": None,
            "bounded": False,
            "maxlen": None,
            "element": "a leaf of shape %s whose .grad has a graph back to itself "
            "(%d such leaves)" % (shape, len(site.cycle_leaves)),
        }
        if kept_at is not None:
            holder["kept_at"] = kept_at
        answer = site.answer
        answer["holder"] = holder
        answer.pop("note", None)
        answer["cause"], answer["fix"] = cause_and_fix(holder, False, True, False, False, {"autograd-cycle"})
