"""CuPy's and JAX's arrays in the heap, for programs that keep GPU memory
without torch (a CuPy or JAX loop whose iterations gpuleak found from the
period of its allocations).

An array's memory: CuPy's `ndarray.data.ptr` and `nbytes`; JAX's
`unsafe_buffer_pointer()` and `nbytes` (single-device arrays; with
XLA_PYTHON_CLIENT_ALLOCATOR=platform each buffer is a driver allocation, so
the requested addresses are the arrays'). Views share their base's memory
and match the same ranges, as tensors sharing a storage do.
"""

import gc
import itertools
import sys


def array_types():
    """The array classes of the frameworks this process imported (a tuple, maybe empty)."""
    found = []
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(getattr(cupy, "ndarray", None), type):
        found.append(cupy.ndarray)
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(getattr(jax, "Array", None), type):
        found.append(jax.Array)
    return tuple(found)


def array_range(array):
    """[start, end) of an array's device memory, or None (deleted, sharded, on the host)."""
    try:
        data = getattr(array, "data", None)
        pointer = getattr(data, "ptr", None)
        if pointer is None:
            pointer = array.unsafe_buffer_pointer()
        size = int(array.nbytes)
    except Exception:
        return None
    if not pointer or size <= 0:
        return None
    return int(pointer), int(pointer) + size


def live_arrays(types):
    """Every live object whose type is a subclass of one of `types` (tested once per type)."""
    is_array = {}

    def category(kind):
        known = is_array.get(kind)
        if known is None:
            try:
                known = issubclass(kind, types)
            except TypeError:
                known = False
            is_array[kind] = known
        return known

    objects = gc.get_objects()
    try:
        found = list(itertools.compress(objects, map(category, map(type, objects))))
    finally:
        del objects
    # JAX's arrays are objects of its C++ extension that the garbage
    # collector may not track: JAX lists them itself.
    jax = sys.modules.get("jax")
    listed = getattr(jax, "live_arrays", None) if jax is not None else None
    if callable(listed):
        seen = set(map(id, found))
        try:
            found.extend(array for array in listed() if id(array) not in seen)
        except Exception:
            pass
    return found
