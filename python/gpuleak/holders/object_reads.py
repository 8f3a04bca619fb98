"""Reading the program's objects without running any of its code.

The holder walk meets arbitrary objects: properties, __getattr__,
__getattribute__ and overridden container methods are the program's code and
must not run. Everything here reads through the builtin types
(object.__getattribute__, dict.items, list.copy, ...) and by the object's real
type, never through isinstance() (which may consult obj.__class__).
"""

import collections
import functools
import gc
import types

CONTAINER_TYPES = (list, tuple, dict, set, frozenset, collections.deque)
TRACEBACK_TYPES = (types.TracebackType, BaseException)
GENERATOR_TYPES = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
CALLABLE_TYPES = (types.FunctionType, types.MethodType, functools.partial)
LRU_CACHE_TYPE = type(functools.lru_cache(maxsize=None)(lambda: None))


def is_a(obj, classes):
    """isinstance() by the object's real type: never runs the object's own code."""
    return issubclass(type(obj), classes)


def members(container):
    """(key, value) pairs of a builtin container or subclass, read through the builtin type."""
    try:
        if is_a(container, dict):
            return list(dict.items(container))
        if is_a(container, list):
            return list(enumerate(list.copy(container)))
        if is_a(container, tuple):
            return list(enumerate(tuple.__getitem__(container, slice(None))))
        if is_a(container, collections.deque):
            return list(enumerate(collections.deque.__iter__(container)))
        if is_a(container, set):
            return [(None, v) for v in set.__iter__(container)]
        if is_a(container, frozenset):
            return [(None, v) for v in frozenset.__iter__(container)]
    except Exception:
        pass
    return []


def deque_maxlen(obj):
    if not is_a(obj, collections.deque):
        return None
    return collections.deque.maxlen.__get__(obj)


def first_attribute(obj, names):
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def instance_dict(obj):
    """obj.__dict__ without running the object's own __getattribute__/__getattr__, or None."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        return None
    return namespace if is_a(namespace, dict) else None


def is_namespace_of(owner, d):
    """True when `d` is the __dict__ of instance `owner` or the namespace of class `owner`."""
    if is_a(owner, type):
        return any(r is d for r in gc.get_referents(owner))
    return instance_dict(owner) is d


def type_name(obj):
    kind = type(obj)
    if kind is LRU_CACHE_TYPE:
        return "lru_cache"
    module = kind.__dict__.get("__module__")
    if is_a(module, str) and module.startswith("torch") and ("Tensor" in kind.__name__ or kind.__name__ == "Parameter"):
        return "Tensor"
    return kind.__name__


def length(obj):
    if is_a(obj, LRU_CACHE_TYPE):
        try:
            return LRU_CACHE_TYPE.cache_info(obj).currsize
        except Exception:
            return None
    if not is_a(obj, CONTAINER_TYPES):
        return None
    for base in (dict, list, tuple, collections.deque, set, frozenset):
        if is_a(obj, base):
            return base.__len__(obj)
    return None


def key_text(d, child, bare=False):
    found = members(d)
    for key, value in found:
        if value is child:
            return format_key(key, bare)
    for key, _ in found:
        if key is child:
            return "<key %s>" % format_key(key, False)
    return "?"


def format_key(key, bare):
    if type(key) is str:
        return key if bare else repr(key)
    if type(key) in (int, float, bool) or key is None:
        return repr(key)
    return "<%s>" % type(key).__name__


def index_text(sequence, child):
    for index, value in members(sequence):
        if value is child:
            return str(index)
    return "?"
