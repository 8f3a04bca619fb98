"""The architecture's arrows, checked: every #include "..." in src/, include/
and python/gpuleak is allowed by the table "Allowed include edges" of
docs/architecture.md, and the Python package calls only C functions that
include/gpuleak/collector_api.h declares (or its own C files define)."""
import os
import re
import subprocess

ROOT = os.path.abspath(os.environ.get("GPULEAK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu")
# Headers the build writes: the HTML report's inlined assets (src/report/html/
# html_assets.cmake), the gRPC client
# protoc makes from src/monitor/pod_resources.proto.
GENERATED = {"generated/html_report_assets.h", "pod_resources.grpc.pb.h", "pod_resources.pb.h"}


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def allowed_edges():
    text = read("docs", "architecture.md")
    section = text.split("## Allowed include edges", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("module", "") or set(cells[0]) <= set("-"):
            continue
        table[cells[0]] = {c.strip() for c in cells[1].split(",") if c.strip()}
    assert table, "docs/architecture.md has no table of allowed include edges"
    return table


def tracked_sources():
    out = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "src", "include", "python/gpuleak"], capture_output=True, text=True
    )
    if out.returncode == 0 and out.stdout.strip():
        files = out.stdout.split()
    else:  # not a git checkout (a source tarball): walk the folders
        files = [
            os.path.relpath(os.path.join(d, n), ROOT)
            for top in ("src", "include", "python/gpuleak")
            for d, _, names in os.walk(os.path.join(ROOT, top))
            for n in names
        ]
    return [f for f in files if f.endswith(SOURCE_SUFFIXES)]


def module_of(path, table):
    """The module a file belongs to: src/NAME, or a sub-folder of it that the
    table gives a row of its own (src/analysis/steps), include/gpuleak or
    python/gpuleak."""
    parts = path.split("/")
    if parts[0] == "src":
        for depth in range(len(parts) - 1, 1, -1):
            folder = "/".join(parts[:depth])
            if folder in table:
                return folder
        return "src/" + parts[1]
    if parts[0] == "include":
        return "include/gpuleak"
    return "python/gpuleak"


def target_of(including, name, table):
    """(module, file) an include names: "trace/records.h" is src/trace,
    "analysis/steps/step_finder.h" src/analysis/steps, "gpuleak/x.h"
    include/gpuleak, a bare name a file beside the includer."""
    first = name.split("/")[0]
    if first == "gpuleak":
        return "include/gpuleak", "include/" + name
    if os.path.isdir(os.path.join(ROOT, "src", first)) and "/" in name:
        return module_of("src/" + name, table), "src/" + name
    beside = os.path.normpath(os.path.join(os.path.dirname(including), name))
    if os.path.exists(os.path.join(ROOT, beside)):
        return module_of(beside, table), beside
    return None, name


def edges():
    for path in tracked_sources():
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if match:
                    yield path, number, match.group(1)


def test_every_include_is_an_allowed_edge():
    table = allowed_edges()
    broken = []
    for path, number, name in edges():
        module = module_of(path, table)
        assert module in table, "%s is in no row of docs/architecture.md's table" % module
        target, target_file = target_of(path, name, table)
        if target is None:
            if name not in GENERATED:
                broken.append('%s:%d includes "%s", which is no file of the tree' % (path, number, name))
            continue
        if target == module or target in table[module] or target_file in table[module]:
            continue
        broken.append('%s:%d: %s -> %s ("%s") is not an allowed edge' % (path, number, module, target, name))
    assert not broken, "include edges docs/architecture.md does not allow:\n" + "\n".join(broken)


def test_the_table_names_only_modules_that_exist():
    table = allowed_edges()
    for module, targets in table.items():
        for entry in {module} | targets:
            assert os.path.exists(os.path.join(ROOT, entry)), "docs/architecture.md names %s" % entry


def test_the_table_has_no_cycle():
    """Data flows one way: no module reaches itself through the table's
    entries (an entry naming a file counts as that file's module)."""
    table = allowed_edges()

    def module_of_entry(entry):
        return module_of(entry, table) if os.path.isfile(os.path.join(ROOT, entry)) else entry

    graph = {m: {module_of_entry(e) for e in targets} - {m} for m, targets in table.items()}
    done, on_path = set(), []

    def visit(module):
        assert module not in on_path, "docs/architecture.md's table has a cycle: " + " -> ".join(on_path + [module])
        if module in done:
            return
        on_path.append(module)
        for target in graph.get(module, ()):
            visit(target)
        on_path.pop()
        done.add(module)

    for module in graph:
        visit(module)


def test_a_split_module_has_a_row_for_each_folder():
    """Once a module is split into rows per sub-folder (src/analysis/steps),
    a new folder beside them needs its own row: its files would otherwise
    pass as the parent's and include what the parent may."""
    table = allowed_edges()
    sources = tracked_sources()
    for parent in {row.rsplit("/", 1)[0] for row in table if row.count("/") >= 2}:
        folders = {os.path.dirname(f) for f in sources if f.startswith(parent + "/") and os.path.dirname(f) != parent}
        for folder in folders:
            top = parent + "/" + folder[len(parent) + 1 :].split("/")[0]
            assert top in table, "%s holds sources but has no row in docs/architecture.md's table" % top


def declared_c_functions():
    names = set()
    for header in ("collector_api.h", "interposer_api.h"):
        names |= set(re.findall(r"\b(gpuleak_[a-z_0-9]+)\s*\(", read("include", "gpuleak", header)))
    return names


def test_python_calls_only_declared_c_functions():
    declared = declared_c_functions()
    defined_by_package = set()
    called = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "python", "gpuleak")):
        for name in files:
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8", errors="replace").read()
            if name.endswith((".c", ".cpp")):
                defined_by_package |= set(re.findall(r"\b(gpuleak_[a-z_0-9]+)\s*\(", text))
            elif name.endswith(".py") and "ctypes" in text:
                # Only modules that reach C through ctypes call C functions; the
                # pytest markers and IPython magics share the gpuleak_ prefix.
                for found in re.findall(r'["\.](gpuleak_[a-z_0-9]+)\b', text):
                    called.setdefault(found, os.path.relpath(path, ROOT))
    unknown = {n: where for n, where in called.items() if n not in declared | defined_by_package}
    assert not unknown, (
        "the Python package calls C functions that include/gpuleak/collector_api.h " "does not declare: %s" % unknown
    )


def test_the_collector_exports_every_declared_function():
    exported = read("src", "collector", "collector.map")
    assert re.search(r"^\s*gpuleak_\*;", exported, re.M), "collector.map no longer exports gpuleak_*"
    assert declared_c_functions(), "collector_api.h declares no gpuleak_* function"
