"""The keeping statement: which line of the program stores into the holder.

The walk knows the holder (a list `failures`, local of `train` in
/job/train.py:30; the attribute `_pending` of class LivePreview; the hook
dict of a Conv2d; ...). This module reads the source of the place that owns
it with Python's own `ast` and names the statement that stores into it:
`failures.append(...)`, `self.sum += val * n`, `cache[key] = out`,
`preds = torch.cat((preds, logits))`, `self.graphs[length] = ...`, a hook
registration, the `@lru_cache` decorator, or the `backward(create_graph=True)`
call of an autograd cycle. Where several statements store into it, the one
inside a loop wins, then one that makes it grow (append, +=, item
assignment) over a plain assignment; initialisations (`x = []`, `x = None`,
`self.total = 0`) never count.

It runs inside the traced program (in the walk's forked copy), where the
source files are the program's own and readable; reports never open source
files, so what it finds travels in the holder annotation (statement text
included). Files of PyTorch, the standard library and gpuleak itself are
never searched: a store there (Adam's own `state[p] = ...`) is not a line the
user can change, so attribute holders of library classes are searched for in
the program's own files instead.
"""

import ast
import os
import sys

_GROWING_CALLS = {
    "append": "append",
    "extend": "extend",
    "insert": "append",
    "appendleft": "append",
    "extendleft": "extend",
    "add": "append",
    "update": "extend",
    "setdefault": "item-assignment",
}
_HOOK_REGISTRATIONS = {
    "_forward_hooks": ("register_forward_hook",),
    "_forward_pre_hooks": ("register_forward_pre_hook",),
    "_backward_hooks": ("register_full_backward_hook", "register_backward_hook"),
    "_backward_pre_hooks": ("register_full_backward_pre_hook",),
    "_state_dict_hooks": ("register_state_dict_hook", "_register_state_dict_hook"),
}
_EMPTY_CALLS = {"list", "dict", "set", "tuple", "deque", "defaultdict", "OrderedDict", "Counter"}
_MAX_SOURCE_BYTES = 4 << 20
_STATEMENT_CHARS = 160


def is_library_file(path):
    """Files that are not the program's own: the standard library, site/dist-packages, gpuleak."""
    if not path or path.startswith("<"):
        return True
    if "/site-packages/" in path or "/dist-packages/" in path:
        return True
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if path.startswith(package_dir):
        return True
    lib = path.find("/lib/python3")
    return lib >= 0


class Store:
    """One statement that stores into the holder."""

    def __init__(self, path, node, kind, function, in_loop, span=(0, 0)):
        self.path = path
        self.line = node.lineno
        self.kind = kind
        self.function = function
        self.in_loop = in_loop
        self.span = span  # first and last line of the function it is in
        self.stores_a_number = _stores_a_number(node)
        self.value = getattr(node, "value", None)  # what an assignment stores

    def rank(self):
        growing = self.kind != "assignment"
        return (not self.stores_a_number, self.in_loop, growing, self.line)

    def in_function_of(self, lines):
        """Whether one of `lines` ((file, line) of the allocation's stack) is in this
        store's function: the code that allocated is the code that stored."""
        return any(path == self.path and self.span[0] <= line <= self.span[1] for path, line in lines)

    def as_answer(self, sources):
        return {
            "file": self.path,
            "line": self.line,
            "kind": self.kind,
            "function": self.function,
            "in_loop": self.in_loop,
            "statement": sources.line_text(self.path, self.line),
        }


class SourceIndex:
    """Parsed source files, each read once per walk."""

    def __init__(self):
        self.trees = {}
        self.lines = {}

    def tree(self, path):
        if path in self.trees:
            return self.trees[path]
        tree = None
        try:
            if os.path.getsize(path) <= _MAX_SOURCE_BYTES:
                with open(path, "rb") as handle:
                    data = handle.read()
                tree = ast.parse(data, filename=path)
                self.lines[path] = data.decode("utf-8", "replace").splitlines()
        except OSError:
            tree = self.tree_of_cell(path)
        except (SyntaxError, ValueError):
            tree = None
        self.trees[path] = tree
        return tree

    def tree_of_cell(self, path):
        """Code that has no file: a notebook cell or IPython input, which IPython keeps in
        linecache's cache under the name its code objects carry."""
        import linecache

        entry = linecache.cache.get(path)
        if not entry or len(entry) < 3:
            return None
        text = "".join(entry[2])
        if len(text) > _MAX_SOURCE_BYTES:
            return None
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError):
            return None
        self.lines[path] = text.splitlines()
        return tree

    def line_text(self, path, line):
        lines = self.lines.get(path) or []
        if 0 < line <= len(lines):
            text = lines[line - 1].strip()
            return text if len(text) <= _STATEMENT_CHARS else text[: _STATEMENT_CHARS - 3] + "..."
        return ""


def expression_text(node):
    try:
        return ast.unparse(node)
    except Exception:
        return ""


def _is_initialisation(value):
    """`[]`, `{}`, `None`, `0`, `list()`, `defaultdict(list)`, `[0] * 900`: a fresh, empty start."""
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.Tuple)):
        return all(_is_initialisation(e) for e in getattr(value, "elts", [])) and not getattr(value, "keys", None)
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Call):
        name = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
        return name in _EMPTY_CALLS and not value.args[1:]
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return _is_initialisation(value.left) or _is_initialisation(value.right)
    return False


_NUMBER_CALLS = {"item", "tolist", "float", "int", "bool", "str", "len", "round"}


def _stores_a_number(node):
    """Whether the statement stores what cannot hold a tensor: `x.item()`, `float(x)`,
    `x.tolist()`, a constant (of two appends to one list, `losses.append(loss.item())` is
    not the one that keeps the memory)."""
    if isinstance(node, ast.Call):
        value = node.args[0] if node.args else None
    else:
        value = getattr(node, "value", None)
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in _NUMBER_CALLS
    return False


def _mentions(node, text):
    return any(expression_text(sub) == text for sub in ast.walk(node) if isinstance(sub, (ast.Name, ast.Attribute)))


class _StoreFinder(ast.NodeVisitor):
    """Statements storing into expressions that `matches(text)` accepts."""

    def __init__(self, path, matches, prefix=""):
        self.path = path
        self.matches = matches
        self.found = []
        self.scope = [prefix] if prefix else []
        self.loops = 0
        self.spans = []  # (first, last line) of the functions being visited

    def function_name(self):
        return ".".join(self.scope) or "<module>"

    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        self.spans.append((node.lineno, getattr(node, "end_lineno", node.lineno)))
        loops, self.loops = self.loops, 0
        self.generic_visit(node)
        self.loops = loops
        self.spans.pop()
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_Lambda(self, node):
        self.generic_visit(node)

    def loop(self, node):
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_For = visit_While = visit_AsyncFor = loop

    def comprehension(self, node):
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = comprehension

    def add(self, node, kind):
        span = self.spans[-1] if self.spans else (1, 1 << 30)
        self.found.append(Store(self.path, node, kind, self.function_name(), self.loops > 0, span))

    def visit_Call(self, node):
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _GROWING_CALLS
            and self.matches(expression_text(func.value))
        ):
            self.add(node, _GROWING_CALLS[func.attr])
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        if self.matches(expression_text(node.target)):
            self.add(node, "augmented-assignment")
        self.generic_visit(node)

    def visit_Assign(self, node):
        for target in node.targets:
            for single in target.elts if isinstance(target, ast.Tuple) else [target]:
                self.assigned(node, single, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.assigned(node, node.target, node.value)
        self.generic_visit(node)

    def assigned(self, node, target, value):
        if isinstance(target, ast.Subscript) and self.matches(expression_text(target.value)):
            self.add(node, "item-assignment")
            return
        text = expression_text(target)
        if not self.matches(text):
            if isinstance(target, ast.Attribute) and self.matches(expression_text(target.value)):
                self.add(node, "attribute-assignment")
            return
        if _mentions(value, text):
            self.add(node, "self-assignment")
        elif not _is_initialisation(value):
            self.add(node, "assignment")


def _scope_node(tree, first_line, name):
    """The function or class definition that starts at first_line (decorators included)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            starts = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first_line in (starts, node.lineno):
                return node
    return None


def _class_node(tree, qualname):
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    candidates = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == parts[-1]]
    return candidates[0] if candidates else None


def best(stores, allocation_lines=()):
    """The store to name: one on the allocation's own stack first (the request's `lines`: of
    two appends to one list, the one the leaking code ran), then one in a function the
    allocation's stack runs through (two tests appending to one global list: the test that
    allocated), then Store.rank."""
    if not stores:
        return None
    on_stack = set(allocation_lines)
    return max(
        stores, key=lambda store: ((store.path, store.line) in on_stack, store.in_function_of(on_stack)) + store.rank()
    )


class KeepingStatements:
    """Finds keeping statements for the holders of one walk."""

    def __init__(self, user_files):
        self.sources = SourceIndex()
        self.user_files = [f for f in dict.fromkeys(user_files) if f and not is_library_file(f)]
        # (file, line) of the stack that allocated the site being named (Site.lines)
        self.allocation_lines = ()

    def answer(self, store):
        return store.as_answer(self.sources) if store is not None else None

    def search(self, path, node, matches, prefix=""):
        finder = _StoreFinder(path, matches, prefix)
        finder.visit(node)
        return finder.found

    def in_function(self, code, name):
        """Stores into local `name` of the function whose code object is `code`."""
        path = code.co_filename
        tree = self.sources.tree(path) if not is_library_file(path) else None
        if tree is None:
            return None
        node = _scope_node(tree, code.co_firstlineno, code.co_name)
        if node is None:
            return None
        qualname = getattr(code, "co_qualname", code.co_name)
        prefix = qualname.rsplit(".", 1)[0] if "." in qualname else ""
        return self.through_return(best(self.search(path, node, _name_matcher(name), prefix), self.allocation_lines))

    def in_module(self, module_name, name):
        """Stores into global `name` anywhere in the module's file."""
        module = sys.modules.get(module_name)
        path = getattr(module, "__file__", None) if module is not None else None
        tree = self.sources.tree(path) if path and not is_library_file(path) else None
        if tree is not None:
            return self.through_return(best(self.search(path, tree, _name_matcher(name)), self.allocation_lines))
        if module_name != "__main__":
            return None
        # An interactive __main__ (a notebook's kernel, IPython) has no file: its globals
        # are stored by cells, and the allocation's own cells are where to look.
        stores = []
        for cell in dict.fromkeys(file for file, _ in self.allocation_lines):
            tree = self.sources.tree(cell) if not is_library_file(cell) else None
            if tree is not None:
                stores.extend(self.search(cell, tree, _name_matcher(name)))
        return self.through_return(best(stores, self.allocation_lines))

    def through_return(self, store):
        """The answer for `store`; when it is `kept = evaluate(...)`, a plain assignment of what
        a function of the program returns, and that function returns a local it grows in a loop
        (`total_loss += loss` ... `return total_loss`), the statement that grows it, with the
        assignment as the call it is reached from. A walk that runs after the function returned
        (a tracked block's end, the program's exit) finds only the variable the result went
        to; the line to change is the one that made it keep every step's memory."""
        if store is None or store.kind != "assignment" or not isinstance(store.value, ast.Call):
            return self.answer(store)
        func = store.value.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        inner = []
        for path in dict.fromkeys([store.path] + self.user_files):
            tree = self.sources.tree(path)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == called:
                    inner.extend(self.growing_returned(path, node))
        found = best(inner, self.allocation_lines)
        if found is None:
            return self.answer(store)
        answer = self.answer(found)
        answer["called_from"] = {
            "file": store.path,
            "line": store.line,
            "function": store.function,
            "statement": self.sources.line_text(store.path, store.line),
        }
        return answer

    def growing_returned(self, path, function):
        """Stores that grow, inside a loop, a local that `function` returns by name."""
        returned = {
            node.value.id
            for node in ast.walk(function)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Name)
        }
        stores = []
        for name in returned:
            stores.extend(
                s
                for s in self.search(path, function, _name_matcher(name))
                if s.in_loop and s.kind != "assignment" and not s.stores_a_number
            )
        return stores

    def for_attribute(self, cls, attribute):
        """Stores into `<anything>.attribute` in the class's own source, else in the program's files."""
        stores = []
        module = sys.modules.get(getattr(cls, "__module__", ""), None)
        path = getattr(module, "__file__", None)
        if path and not is_library_file(path):
            tree = self.sources.tree(path)
            node = _class_node(tree, cls.__qualname__) if tree is not None else None
            if node is not None:
                stores = self.search(path, node, _attribute_matcher(attribute))
        if not stores:
            for path in self.user_files:
                tree = self.sources.tree(path)
                if tree is not None:
                    stores.extend(self.search(path, tree, _attribute_matcher(attribute)))
        store = best(stores, self.allocation_lines)
        found = self.answer(store)
        if found is not None and "." in store.function:
            # A store inside a method (`self.sum += val * n` in AverageMeter.update) is
            # the class's line; the user changes the call that hands it the tensor.
            class_name, method = store.function.rsplit(".", 1)
            caller = self.method_call(class_name.rsplit(".", 1)[-1], method)
            if caller is not None:
                found["called_from"] = caller
        return found

    def method_call(self, class_name, method):
        """The program's call `<x>.method(...)` that most likely runs the class's method:
        in the function the allocation came from, on a receiver made by `class_name(...)`,
        inside a loop. None when no call of that name is outside the class itself."""
        if method.startswith("__"):
            return None
        on_stack = set(self.allocation_lines)
        calls = []
        for path in self.user_files:
            tree = self.sources.tree(path)
            if tree is None:
                continue
            instances = _instance_names(tree, class_name)
            finder = _MethodCallFinder(path, method, class_name)
            finder.visit(tree)
            for call, function, in_loop, span in finder.found:
                in_allocating_function = any(file == path and span[0] <= line <= span[1] for file, line in on_stack)
                receiver = expression_text(call.func.value)
                made_here = receiver in instances or receiver.split("[", 1)[0] in instances
                calls.append(((in_allocating_function, made_here, in_loop, -call.lineno), path, call.lineno, function))
        if not calls:
            return None
        _, path, line, function = max(calls, key=lambda c: c[0])
        return {"file": path, "line": line, "function": function, "statement": self.sources.line_text(path, line)}

    def in_closure(self, function, name):
        """Stores into the free variable `name` of a closure: in the closure, then in its maker."""
        code = function.__code__
        found = self.in_function(code, name)
        if found is not None and found["kind"] != "assignment":
            return found
        qualname = getattr(function, "__qualname__", "")
        path = code.co_filename
        tree = self.sources.tree(path) if not is_library_file(path) else None
        if tree is None or ".<locals>." not in qualname:
            return found
        maker_name = qualname.split(".<locals>.")[-2].split(".")[-1]
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == maker_name:
                stores = self.search(path, node, _name_matcher(name))
                if stores:
                    return self.answer(best(stores, self.allocation_lines))
        return found

    def calls(self, method_names, keyword=None):
        """Calls `<x>.<one of method_names>(...)` in the program's files (with keyword=True if given)."""
        stores = []
        for path in self.user_files:
            tree = self.sources.tree(path)
            if tree is None:
                continue
            finder = _CallFinder(path, method_names, keyword)
            finder.visit(tree)
            stores.extend(finder.found)
        return self.answer(best(stores, self.allocation_lines))

    def hook_registration(self, attribute):
        return self.calls(_HOOK_REGISTRATIONS.get(attribute, ("register_forward_hook",)))

    def backward_with_create_graph(self):
        return self.calls(("backward",), keyword="create_graph")

    def decorator(self, function):
        """The line of the lru_cache decorator (the function's first line when decorated)."""
        code = getattr(function, "__code__", None)
        if code is None or is_library_file(code.co_filename):
            return None
        self.sources.tree(code.co_filename)
        line = code.co_firstlineno
        return {
            "file": code.co_filename,
            "line": line,
            "kind": "lru-cache",
            "function": getattr(function, "__qualname__", code.co_name),
            "in_loop": False,
            "statement": self.sources.line_text(code.co_filename, line),
        }

    def leaf_names(self):
        """Names assigned a tensor made with requires_grad=True anywhere in the program's files."""
        names = []
        for path in self.user_files:
            tree = self.sources.tree(path)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Call)
                    and any(k.arg == "requires_grad" and _truthy(k.value) for k in node.value.keywords)
                ):
                    names.extend(expression_text(t) for t in node.targets if isinstance(t, ast.Name))
        return list(dict.fromkeys(names))


def _instance_names(tree, class_name):
    """Names and attributes assigned `class_name(...)` in a file (`meter = AverageMeter()`,
    `self.losses = AverageMeter()`, `meters['loss'] = AverageMeter()`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called == class_name:
                for target in node.targets:
                    names.add(expression_text(target).split("[", 1)[0])
    return names


class _MethodCallFinder(_StoreFinder):
    """Calls `<x>.method(...)` outside the class that defines it, each with its function,
    whether it runs in a loop, and the line span of the function it is in."""

    def __init__(self, path, method, class_name):
        super().__init__(path, lambda text: False)
        self.method = method
        self.class_name = class_name

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == self.method and self.class_name not in self.scope:
            span = self.spans[-1] if self.spans else (1, 1 << 30)
            self.found.append((node, self.function_name(), self.loops > 0, span))
        self.generic_visit(node)


class _CallFinder(_StoreFinder):
    def __init__(self, path, method_names, keyword):
        super().__init__(path, lambda text: False)
        self.method_names = method_names
        self.keyword = keyword

    def visit_Call(self, node):
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in self.method_names
            and (self.keyword is None or any(k.arg == self.keyword and _truthy(k.value) for k in node.keywords))
        ):
            self.add(node, "backward-create-graph" if self.keyword else "hook-registration")
        self.generic_visit(node)


def _truthy(value):
    return not (isinstance(value, ast.Constant) and not value.value)


def _name_matcher(name):
    base = name.split("[", 1)[0].split(".", 1)[0]
    full = name

    def matches(text):
        return text == full or text == base

    return matches


def _attribute_matcher(attribute):
    suffix = "." + attribute.split("[", 1)[0]

    def matches(text):
        return text.endswith(suffix)

    return matches
