"""Naming: the protocol's `holder` object for a chain [holder, ..., root]:
its type, the name a person would write to reach it (`history['loss']`,
`_pending`, `positional_encoding`), where it lives (`local of train (x.py:3)`,
`attribute of Trainer`, `buffer of MyBatchNorm`, `hook on Conv2d`, `module
__main__`), and, for elements that are closures, lambdas, partials or bound
methods, what each element captures.
"""

import collections
import functools
import sys
import types

from gpuleak.holders.object_reads import (
    GENERATOR_TYPES,
    CALLABLE_TYPES,
    deque_maxlen,
    first_attribute,
    index_text,
    instance_dict,
    is_a,
    is_namespace_of,
    key_text,
    length,
    members,
    type_name,
)

_CO_OPTIMIZED = 0x0001
_SLOT_OWNER_WORDS = {"buffer": "buffer of", "parameter": "parameter of", "submodule": "submodule of"}


class Naming:
    """The naming part of the walk (state lives in walk.Walk)."""

    def describe(self, chain, holder_obj):
        """The protocol's `holder` object for a chain [holder, ..., root]."""
        nodes = [self.keep[key] for key in reversed(chain[:-1])]  # top object first, holder last
        root = chain[-1]
        if isinstance(root, tuple):
            owner, variable, function = root[1], root[2], root[3]
            name, consumed, prefix = variable, 1, function
        else:
            owner, name, consumed, prefix = self.name_below_root(self.keep[root], nodes)
        name += "".join(segments(nodes, consumed))
        if is_a(holder_obj, dict) and id(holder_obj) in self.hook_dicts:
            # The hooks themselves pile up: name the hook dict as the module has it.
            owner, name = self.hook_dicts[id(holder_obj)]
            prefix = ""
        return {
            "type": type_name(holder_obj),
            "name": name,
            "owner": owner,
            "path": "%s.%s" % (prefix, name) if prefix else name,
            "length": length(holder_obj),
            "bounded": deque_maxlen(holder_obj) is not None,
            "maxlen": deque_maxlen(holder_obj),
        }

    def name_below_root(self, root, nodes):
        """(owner, variable, nodes consumed, path prefix) for how `root` holds nodes[0]."""
        child = nodes[0]
        below = nodes[1] if len(nodes) > 1 else None
        if is_a(root, dict) and id(root) in self.module_dicts:
            module = self.module_dicts[id(root)]
            return "module %s" % module, key_text(root, child, bare=True), 1, module
        if is_a(root, types.FunctionType):
            owner = self.hook_label(root) or "closure of %s" % root.__qualname__
            variable = function_slot(root, child, below)
            consumed = 2 if variable and below is not None else 1
            return owner, variable or "?", consumed, root.__qualname__
        if is_a(root, GENERATOR_TYPES):
            frame = first_attribute(root, ("gi_frame", "cr_frame", "ag_frame"))
            code = first_attribute(root, ("gi_code", "cr_code", "ag_code"))
            where = root.__qualname__
            if code is not None:
                where = "%s (%s:%d)" % (where, code.co_filename, code.co_firstlineno)
            variable = local_name(frame, child) if frame is not None else None
            return "local of %s" % where, variable or "?", 1, root.__qualname__
        if is_a(root, type):
            variable, consumed = attribute(root, child, below)
            return "attribute of class %s" % root.__name__, variable, consumed, root.__name__
        variable, consumed = attribute(root, child, below)
        owner_type = type(root).__name__
        if consumed == 2 and len(nodes) > 2 and id(below) in self.module_slots:
            # module.__dict__ -> _buffers -> tensor: "buffer of MyBatchNorm", "running_var"
            role, module_type = self.module_slots[id(below)]
            slot = key_text(below, nodes[2], bare=True)
            return "%s %s" % (_SLOT_OWNER_WORDS[role], module_type), slot, 3, owner_type
        return "attribute of %s" % owner_type, variable, consumed, owner_type

    def hook_label(self, function):
        for hook, label in self.hook_callables:
            if hook is function or (is_a(hook, types.MethodType) and hook.__func__ is function):
                return label
        return None

    def hook_filling(self, holder):
        """The hook's label when a registered module hook can reach `holder`.

        A hook reaches it through its closure, an attribute of the instance it
        is bound to, a functools.partial argument, or a global name it uses.
        """
        for hook, label in self.hook_callables:
            if not is_a(hook, CALLABLE_TYPES):
                continue
            try:
                function = hook
                if is_a(hook, functools.partial):
                    if any(a is holder for a in hook.args) or any(v is holder for v in (hook.keywords or {}).values()):
                        return label
                    function = hook.func
                if is_a(function, types.MethodType):
                    namespace = instance_dict(function.__self__) or {}
                    if any(v is holder for v in list(namespace.values())):
                        return label
                    function = function.__func__
                if not is_a(function, types.FunctionType):
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

    def element_text(self, climb, element_key, holder_key):
        """How each element of the holder keeps the memory, when it is a callable:
        "closure queue.<locals>.redraw capturing `frame`", "lambda with `logits`
        bound", "functools.partial of decode_boxes", "bound method
        BatchStats.report (self.predictions)"; None otherwise."""
        path = path_between(climb, element_key, holder_key)
        if path is None:
            return None
        objects = [self.keep[key] for key in path]  # the element first, the holder last
        for index in range(1, len(objects)):
            obj = objects[index]
            child = objects[index - 1]
            grandchild = objects[index - 2] if index >= 2 else None
            if is_a(obj, types.FunctionType):
                variable = function_slot(obj, child, grandchild)
                what = "lambda" if obj.__name__ == "<lambda>" else "closure %s" % obj.__qualname__
                if variable and child is obj.__defaults__:
                    return "%s with `%s` bound as a default" % (what, variable)
                if variable:
                    return "%s capturing `%s`" % (what, variable)
                return what
            if is_a(obj, functools.partial):
                function = getattr(obj.func, "__qualname__", type(obj.func).__name__)
                return "functools.partial of %s" % function
            if is_a(obj, types.MethodType):
                owner = obj.__self__
                attribute_name = None
                if child is owner and index >= 3 and is_namespace_of(owner, objects[index - 2]):
                    attribute_name = key_text(objects[index - 2], objects[index - 3], bare=True)
                text = "bound method %s" % getattr(obj.__func__, "__qualname__", "?")
                return text + (" (self.%s)" % attribute_name if attribute_name else "")
        return None


def path_between(climb, low_key, high_key):
    """Ids [low, ..., high] along referrer edges found by the climb, or None."""
    if low_key == high_key:
        return [low_key]
    previous = {low_key: None}
    queue = [low_key]
    while queue:
        key = queue.pop(0)
        for parent in climb.parents.get(key, ()):
            if parent in previous:
                continue
            previous[parent] = key
            if parent == high_key:
                path = [parent]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return list(reversed(path))
            queue.append(parent)
    return None


def segments(nodes, start):
    """Subscripts for each edge nodes[i-1] -> nodes[i], i >= start: ['loss'], [3]."""
    text = []
    for index in range(max(start, 1), len(nodes)):
        parent, child = nodes[index - 1], nodes[index]
        if is_a(parent, dict):
            text.append("[%s]" % key_text(parent, child))
        elif is_a(parent, (list, tuple, collections.deque)):
            text.append("[%s]" % index_text(parent, child))
        elif is_a(parent, (set, frozenset)):
            text.append("{...}")
        elif is_a(parent, types.FrameType):
            text.append(".<local %s>" % (local_name(parent, child) or "?"))
        # cells, tracebacks, exceptions, bound methods and partials only relay
    return text


def attribute(owner, child, below):
    """(attribute name, nodes consumed) for how instance or class `owner` holds `child`.

    `child` is either owner's namespace dict, in which case the attribute
    holds `below`, or the value itself (slots, inline values).
    """
    if below is not None and is_a(child, dict) and is_namespace_of(owner, child):
        return key_text(child, below, bare=True), 2
    try:
        if is_a(owner, type):
            namespace = dict(type.__getattribute__(owner, "__dict__"))
        else:
            namespace = instance_dict(owner) or {}
        for name, value in members(namespace):
            if value is child:
                return name, 1
    except Exception:
        pass
    return "?", 1


def function_slot(function, child, below):
    """The name under which a function holds `below`: a closure variable or a default."""
    code = function.__code__
    if child is function.__closure__:
        for index, cell in enumerate(child or ()):
            if cell is below and index < len(code.co_freevars):
                return code.co_freevars[index]
    if child is function.__defaults__ and below is not None:
        positional = code.co_varnames[: code.co_argcount]
        defaults = function.__defaults__ or ()
        for offset, value in enumerate(defaults):
            if value is below:
                return positional[len(positional) - len(defaults) + offset]
    if is_a(child, types.CellType) and function.__closure__:
        for index, cell in enumerate(function.__closure__):
            if cell is child and index < len(code.co_freevars):
                return code.co_freevars[index]
    return None


def local_name(frame, child):
    """The local of a frame kept by a traceback or a suspended generator that holds child."""
    try:
        snapshot = frame.f_locals
        items = list(snapshot.items())
        if sys.version_info < (3, 13) and type(snapshot) is dict and frame.f_code.co_flags & _CO_OPTIMIZED:
            snapshot.clear()  # see collect_frame_locals: the snapshot would outlive this walk
    except Exception:
        return None
    for name, value in items:
        if value is child:
            return name
    return None
