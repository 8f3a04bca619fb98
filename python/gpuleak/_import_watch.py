"""Running set-up code right after a package's own module code, without importing it.

ImportWatcher is a meta path finder that finds nothing itself. For the names it
waits for, it asks the other finders for the spec, then shadows that spec's
loader's exec_module on the instance, so that `on_imported(name, module)` runs
right after the module's code. The loader object stays the same (the shadow is
deleted as the import runs), so the module's __loader__ and __spec__ are what
they would be without gpuleak. A program that imports none of the names pays
one set lookup per import. Used for torch (_boot.py) and for CuPy and JAX
(_array_frameworks.py).
"""

import sys


class ImportWatcher:
    def __init__(self, names, on_imported, on_unwatchable):
        self.finding = False
        self.pending = set(names)
        self.on_imported = on_imported  # (name, module)
        self.on_unwatchable = on_unwatchable  # (name, loader): its exec_module cannot be shadowed

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pending or self.finding:
            return None
        self.finding = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # Still pending until the module's code has run: a library that only
        # probes (importlib.util.find_spec) imports nothing, and the real
        # import asks again.
        self.watch(fullname, spec.loader)
        return spec

    def watch(self, name, loader):
        run_module_code = loader.exec_module
        watcher = self

        def exec_module(module):
            try:
                del loader.exec_module
            except AttributeError:
                pass
            run_module_code(module)
            if name not in watcher.pending:
                return  # set up already (the same loader shadowed twice)
            watcher.pending.discard(name)
            if not watcher.pending:
                try:
                    sys.meta_path.remove(watcher)
                except ValueError:
                    pass
            watcher.on_imported(name, module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            self.on_unwatchable(name, loader)

    def invalidate_caches(self):
        pass
