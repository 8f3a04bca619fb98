"""Graph walk: which held tensors keep, through their autograd graph, saved
tensors that cover the requested addresses; and the autograd reference cycle
that `backward(create_graph=True)` leaves on a leaf (held in C++, no Python
reference).

Reading a saved tensor runs nothing of the program's except the unpack hook
of `saved_tensors_hooks`; graphs of non-reentrant checkpoints (whose unpack
recomputes the forward pass) are skipped altogether.
"""

from gpuleak.holders.heap_scan import ELEMENTS_KEPT_PER_SITE, storage_range
from gpuleak.holders.object_reads import instance_dict, is_a

_GRAPH_NODES_PER_ROOT = 20000
_GRAPH_NODES_TOTAL = 400000
_CYCLE_NODES_PER_LEAF = 2000
# A tensor whose graph holds this many earlier nodes of its own grad_fn's type
# is a carried state (a walk starts after 8 steps of growth, one node a step).
_CARRIED_STATE_RECURRENCES = 6


def grad_fn(tensor):
    try:
        return tensor.grad_fn
    except Exception:
        return None


def next_nodes(node):
    """The nodes of the graph that `node` hands its gradients on to (its next_functions); none
    when they cannot be read."""
    try:
        following = node.next_functions
    except Exception:
        return []
    return [entry[0] for entry in following if entry[0] is not None]


def is_scalar(tensor):
    try:
        return tensor.numel() == 1
    except Exception:
        return False


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


class plain_tensor_methods:
    """Calls tensor methods without the __torch_function__ of tensor subclasses."""

    def __init__(self, torch):
        disable = getattr(torch._C, "DisableTorchFunctionSubclass", None) or getattr(
            torch._C, "DisableTorchFunction", None
        )
        self.context = disable() if disable is not None else None

    def __enter__(self):
        if self.context is not None:
            self.context.__enter__()

    def __exit__(self, *error):
        if self.context is not None:
            self.context.__exit__(*error)
        return False


def node_signature(node):
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


class GraphWalk:
    """The autograd part of the walk (state lives in walk.Walk)."""

    def match_graphs(self, tensors, ranges, sites):
        """Finds held tensors whose autograd graph saved tensors covering requested ranges.

        A tensor whose grad_fn lies inside the graph of another matching
        tensor is dropped: the outer one keeps it (torch keeps the Python
        object of a saved input alive from C++, so such inner tensors are
        live objects that no Python container holds) -- unless it is a
        carried state: its own graph holds earlier nodes made the same way as
        its grad_fn, step after step (an RNN hidden state fed back without
        detach; see node_signature). That tensor is what chains the steps
        together, whatever else (the step's output) reaches it, so it comes
        first.
        """
        if self.checkpointing:
            # Reading a saved tensor of a non-reentrant checkpoint would
            # recompute its forward pass: leave those graphs alone.
            return
        roots = self.own([])  # (tensor, its grad_fn): keeping the node objects
        for tensor in tensors:  # alive keeps their ids stable during the walks
            node = grad_fn(tensor)
            if node is not None:
                roots.append((tensor, node))
        root_node_ids = {id(node) for _, node in roots}
        inner_node_ids = set()
        matched = []  # (root index, saved count, {site index: {range index}})
        budget = [_GRAPH_NODES_TOTAL]
        carried = {}  # root index -> recurrences, for carried states
        for index, (tensor, node) in enumerate(roots):
            if budget[0] <= 0 or self.out_of_time():
                break
            recurrences = [0]
            saved_ranges = self.saved_tensor_ranges(node, budget, root_node_ids, inner_node_ids, recurrences)
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
                    while place < len(site.graph_carried) and site.graph_carried[place] >= carried[index]:
                        place += 1
                    site.graph_roots.insert(place, tensor)
                    site.graph_carried.insert(place, carried[index])
                    del site.graph_roots[ELEMENTS_KEPT_PER_SITE:]
                elif len(site.graph_roots) < ELEMENTS_KEPT_PER_SITE:
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

    def saved_tensor_ranges(self, root, budget, root_node_ids=(), inner_node_ids=None, recurrences=None):
        """Storage ranges of the activations saved in the graph below `root`.

        Leaves that require grad (parameters) are left out: they live as long
        as the model whatever the graph does. `recurrences[0]`, when given,
        is increased for each node below the root with the root's signature.
        """
        root_type = type(root)
        root_signature = node_signature(root) if recurrences is not None else None
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
            context = instance_dict(node)
            if context:  # tensors a custom Function kept as ctx attributes
                values.extend(v for v in list(context.values()) if is_a(v, tensor_type))
            for value in values:
                for saved in value if is_a(value, (list, tuple)) else (value,):
                    if not is_a(saved, tensor_type):
                        continue
                    try:
                        if saved.requires_grad and saved.is_leaf:
                            continue
                    except Exception:
                        continue
                    span = storage_range(saved)
                    if span is not None:
                        found[span[0]] = span[1]
            del values
            for child in next_nodes(node):
                if id(child) not in seen:
                    seen[id(child)] = child
                    pending.append(child)
                    if recurrences is not None and type(child) is root_type and node_signature(child) == root_signature:
                        recurrences[0] += 1
                    if id(child) in root_node_ids:
                        inner_node_ids.add(id(child))
        return list(found.items())

    def in_grad_cycle(self, tensor):
        """True when `tensor` is a leaf whose .grad has a graph that reaches back to it.

        That is what `backward(create_graph=True)` leaves behind: tensor ->
        tensor.grad -> grad.grad_fn -> ... -> AccumulateGrad(tensor). The
        cycle lives in C++, so it keeps the tensor (and everything the
        gradient's graph saved) after every Python name is gone.
        """
        try:
            if not (tensor.is_leaf and tensor.requires_grad):
                return False
            gradient = tensor.grad
        except Exception:
            return False
        node = grad_fn(gradient) if gradient is not None else None
        if node is None:
            return False
        seen = {id(node): node}  # the objects too: a wrapper freed early would free its id
        pending = [node]
        while pending and len(seen) <= _CYCLE_NODES_PER_LEAF:
            node = pending.pop()
            if type(node).__name__ == "AccumulateGrad":
                try:
                    if node.variable is tensor:
                        return True
                except Exception:
                    pass
                continue
            for child in next_nodes(node):
                if id(child) not in seen:
                    seen[id(child)] = child
                    pending.append(child)
        return False
