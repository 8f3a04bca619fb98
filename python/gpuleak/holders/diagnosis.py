"""Diagnosis: a short cause token and the fix a person should apply, from
what the holder is and how it keeps the memory."""

from gpuleak._quantities import format_bytes
from gpuleak.holders.heap_scan import storage_range

# A kept view is worth naming when its base holds at least this much more
# than the view's own elements (and at least twice as much): the slice of a
# logits tensor, not a transpose.
VIEW_EXCESS_BYTES = 1 << 20


# What to keep instead of device arrays, per framework of the elements
# (the walk's facts "jax-arrays", "cupy-arrays"); torch's tensors otherwise.
HOST_COPIES = {
    "jax-arrays": "host copies (jax.device_get(x), or float(x) for scalars)",
    "cupy-arrays": "host copies (x.get(), or float(x) for scalars)",
}
TORCH_HOST_COPIES = ".cpu() copies (or .item() for scalars)"


def top_package(obj):
    """The first component of the module that defines obj's type: "torchmetrics", "jax"."""
    return (getattr(type(obj), "__module__", "") or "").split(".")[0]


def array_framework_fact(elements):
    """ "jax-arrays" or "cupy-arrays" when the held elements are that framework's arrays, else None."""
    for element in elements:
        package = top_package(element)
        if package in ("jax", "jaxlib"):
            return "jax-arrays"
        if package == "cupy":
            return "cupy-arrays"
    return None


def view_of_larger_base(tensors):
    """(own bytes, base bytes) of the first tensor that is a view keeping a much larger
    storage alive (a slice such as logits[:, -1], detached or not), or None."""
    for t in tensors:
        storage = storage_range(t)
        if storage is None:
            continue
        try:
            own = t.numel() * t.element_size()
        except Exception:  # not a plain tensor
            continue
        base = storage[1] - storage[0]
        if base >= 2 * own and base - own >= VIEW_EXCESS_BYTES:
            return own, base
    return None


# Libraries that keep what a program hands them, and the fix each documents:
# never "store .cpu() copies in _optimizers" (a library's private list).
# Keyed by the top package of the type that owns the holder.
LIBRARY_PACKAGES = ("accelerate", "torchmetrics")
# The program's calls that hand a library the objects it keeps: the keeping statement of a
# holder inside the library (whose own store is in a file the user does not change).
LIBRARY_HANDOVER_CALLS = {
    "accelerate": ("prepare", "prepare_model", "prepare_optimizer"),
    "torchmetrics": ("update", "forward"),
}


def owning_library(objects):
    """(package, type name) of the first of `objects` (the holder's owners, nearest first)
    whose type comes from a library in LIBRARY_PACKAGES, or None."""
    for owner in objects:
        package = top_package(owner)
        if package in LIBRARY_PACKAGES:
            return package, type(owner).__name__
    return None


def cause_and_fix(holder, through_traceback, has_grad_fn, scalar, integer_keys, facts=(), view=None, library=None):
    """(cause, fix). `facts` is a set of words the walk found: "autograd-cycle",
    "hook-dict", "lru-cache", "buffer", "optimizer-state", "cuda-graph",
    "grows-by-concatenation", and "jax-arrays" or "cupy-arrays" (the elements'
    framework, when not torch's). `view`: (own bytes, base bytes) when the held
    elements are views of much larger tensors (view_of_larger_base). `library`:
    (package, type name) when a library's object owns the holder (owning_library)."""
    kind, name = holder["type"], holder["name"] or "it"
    filled_by = holder.get("filled_by")
    container = holder["length"] is not None
    if "autograd-cycle" in facts:
        return (
            "autograd-cycle",
            "backward(create_graph=True) leaves %s -> %s.grad -> its grad_fn -> %s, a "
            "reference cycle inside autograd that no Python name holds: use "
            "torch.autograd.grad(..., create_graph=True) instead of backward(), or set "
            "%s.grad = None once the gradient is used" % (name, name, name, name),
        )
    if through_traceback:
        return (
            "exception-traceback",
            "don't keep the exception or its traceback (it keeps every local of the frames it "
            "passed through); keep str(e) or traceback.format_exc() instead",
        )
    if "hook-dict" in facts:
        return (
            "hooks-registered-repeatedly",
            "a hook is registered again on every call and never removed: keep the handle "
            "that register_*_hook returns and call handle.remove() when done (or register "
            "the hook once)",
        )
    if "lru-cache" in facts:
        return (
            "unbounded-cache",
            "the lru_cache of %s keeps every result it ever returned: bound it "
            "(lru_cache(maxsize=N)), cache .cpu() copies, or call %s.cache_clear()" % (name, name),
        )
    if "optimizer-state" in facts:
        return (
            "optimizer-state",
            "the optimizer's state keeps parameters that were replaced: delete the old entry "
            "(del optimizer.state[old_param]) when a parameter is replaced, or rebuild the "
            "optimizer",
        )
    if "cuda-graph" in facts:
        return (
            "cuda-graph-per-shape",
            "one CUDA graph (with its private memory pool and static tensors) is kept per "
            "new input shape in %s: pad inputs to a few fixed shapes so graphs are reused, "
            "or bound %s" % (name, name),
        )
    if library is not None and library[0] == "accelerate":
        return (
            "library-keeps-prepared",
            "%s keeps every object passed to accelerator.prepare() in %s: prepare the model "
            "and optimizer once and reuse them, or call accelerator.free_memory() before "
            "preparing new ones (as between hyper-parameter trials)" % (holder["owner"], name),
        )
    if library is not None and library[0] == "torchmetrics":
        return (
            "metric-state-not-reset",
            "the metric %s keeps every update() in its state %s: call .reset() after "
            ".compute() at the end of each epoch, or create the metric with "
            "compute_on_cpu=True so its list states live on the CPU" % (library[1], name),
        )
    if "buffer" in facts and has_grad_fn:
        return (
            "graph-accumulated",
            "the buffer %s is updated with autograd on, so it chains every step's graph: "
            "update it under torch.no_grad() (or from .detach()ed values)" % name,
        )
    if filled_by:
        return (
            "forward-hook",
            "the %s stores tensors in %s: store .detach() (or .detach().cpu()) and clear %s "
            "each step, or remove the hook when done" % (filled_by, name, name),
        )
    if holder["bounded"]:
        return (
            "bounded-container",
            "bounded by maxlen=%s: growth stops at %s elements; lower maxlen or store "
            ".detach().cpu() copies if that is too much" % (holder["maxlen"], holder["maxlen"]),
        )
    if integer_keys and kind in ("dict", "OrderedDict", "defaultdict"):
        return ("cache-by-step", "bound the cache %s (drop old steps) or store .detach().cpu() copies in it" % name)
    if has_grad_fn and container:
        if scalar:
            return (
                "graph-in-container",
                "append loss.item() (a Python float) instead of the loss tensor: each tensor "
                "in %s keeps its step's autograd graph alive" % name,
            )
        return (
            "graph-in-container",
            "detach() before storing (.detach(), or .detach().cpu()), or compute it under "
            "torch.no_grad() if it is not trained on: each tensor in %s keeps its step's "
            "autograd graph alive" % name,
        )
    if has_grad_fn:
        # One tensor whose graph reaches back over many steps: a sum
        # (`total += loss`, a scalar) or a state carried into the next step
        # (an RNN's hidden state without detach(), not a scalar). The graph
        # looks the same either way, so the likelier fix comes first.
        if scalar:
            return (
                "graph-accumulated",
                "%s chains every step's autograd graph: accumulate loss.item() (or "
                "loss.detach()) instead of the tensor, or detach() a state that is carried "
                "into the next step" % name,
            )
        return (
            "graph-accumulated",
            "%s chains every step's autograd graph: detach() it where it is carried into "
            "the next step (%s = %s.detach(), as truncated backpropagation does), or, if "
            "it is a running sum, accumulate .item() instead" % (name, name, name),
        )
    if view is not None:
        own, base = view
        return (
            "view-keeps-base",
            "each tensor kept in %s is a view (%s of its own) that keeps its whole base "
            "tensor (%s) alive: store a copy of the slice, .clone() (or .cpu()), not the "
            "slice itself" % (name, format_bytes(own), format_bytes(base)),
        )
    if container:
        copies = next((HOST_COPIES[f] for f in facts if f in HOST_COPIES), TORCH_HOST_COPIES)
        return ("tensor-container", "store %s in %s, or clear it periodically" % (copies, name))
    if kind == "Tensor" and "grows-by-concatenation" in facts:
        return (
            "tensor-container",
            "%s is re-made bigger every step (torch.cat): move each piece to the CPU before "
            "concatenating, or concatenate at the end" % name,
        )
    return (
        "single-reference",
        "drop the reference (del %s, or reassign it) when the tensor is no longer needed" % name,
    )
