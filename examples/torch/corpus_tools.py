"""Reads and checks examples/torch/corpus.json, the labels of the PyTorch leak corpus.

Each leak script marks the line whose allocation leaks, or that keeps the
reference, with a `# LEAK: <cause>` comment. corpus.json records that line as
`marked_line` ("examples/torch/<script>:<line>") and the function around it as
`marked_function`; this module finds both by scanning the scripts, so the
labels never drift from the code:

    python3 examples/torch/corpus_tools.py --check   # exit 1 and list problems if corpus.json is stale
    python3 examples/torch/corpus_tools.py --write   # rewrite marked_line / marked_function

Used by tests/python/test_torch_corpus_runs.py (CPU) and tests/gpu/torch_corpus.py (GPU).
Standard library only; runs on Python 3.8 and later.
"""
import argparse
import ast
import json
import os
import re
import sys

CORPUS_DIR = os.path.dirname(os.path.abspath(__file__))
CORPUS_JSON = os.path.join(CORPUS_DIR, "corpus.json")
REPO_RELATIVE_DIR = "examples/torch"
MARKER = re.compile(r"#\s*LEAK:\s*([a-z][a-z0-9-]*)")

LEAK_CAUSES = ("tensors-kept-alive", "autograd-graph-kept-alive", "non-tensor-driver-allocations")
ALL_CAUSES = LEAK_CAUSES + ("bounded-growth",)


def corpus_scripts(directory=CORPUS_DIR):
    """The case scripts in the folder: leak_*.py and control_*.py, sorted."""
    return sorted(name for name in os.listdir(directory)
                  if name.endswith(".py") and name.startswith(("leak_", "control_")))


def load_corpus(path=CORPUS_JSON):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def scan_markers(script_path):
    """[(line, cause)] for every `# LEAK: <cause>` comment in the script (1-based lines)."""
    markers = []
    with open(script_path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            match = MARKER.search(text)
            if match:
                markers.append((number, match.group(1)))
    return markers


def function_ranges(script_path):
    """{qualified name: (first line, last line)} of every function and method in the script."""
    with open(script_path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=script_path)
    ranges = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                ranges[name] = (first, child.end_lineno)
                visit(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return ranges


def enclosing_function(ranges, line):
    """The innermost function (qualified name) that contains `line`, or "<module>"."""
    best, best_size = "<module>", None
    for name, (first, last) in ranges.items():
        if first <= line <= last and (best_size is None or last - first < best_size):
            best, best_size = name, last - first
    return best


def scanned_labels(script, directory=CORPUS_DIR):
    """What the script's markers say: marked_line and marked_function (None for a script without a marker)."""
    path = os.path.join(directory, script)
    markers = scan_markers(path)
    if not markers:
        return {"marked_line": None, "marked_function": None, "markers": []}
    line = markers[0][0]
    return {"marked_line": "%s/%s:%d" % (REPO_RELATIVE_DIR, script, line),
            "marked_function": enclosing_function(function_ranges(path), line),
            "markers": markers}


def problems(corpus, directory=CORPUS_DIR):
    """Everything that makes corpus.json disagree with the scripts, as sentences."""
    found = []
    cases = corpus.get("cases", [])
    listed = [case.get("script") for case in cases]
    for script in corpus_scripts(directory):
        if script not in listed:
            found.append("%s has no entry in corpus.json" % script)
    for script in listed:
        if listed.count(script) > 1:
            found.append("%s is listed %d times" % (script, listed.count(script)))
    for case in cases:
        script = case.get("script", "?")
        path = os.path.join(directory, script)
        if not os.path.exists(path):
            found.append("%s is listed but does not exist" % script)
            continue
        scanned = scanned_labels(script, directory)
        expected = case.get("expected", {})
        kind = case.get("kind")
        if kind == "leak":
            if len(scanned["markers"]) != 1:
                found.append("%s: a leak script needs exactly one '# LEAK:' marker, found %d"
                             % (script, len(scanned["markers"])))
            elif scanned["markers"][0][1] != expected.get("cause"):
                found.append("%s: marker says %s, label says %s"
                             % (script, scanned["markers"][0][1], expected.get("cause")))
        elif kind == "control":
            if scanned["markers"]:
                found.append("%s: a control must not have a '# LEAK:' marker" % script)
        else:
            found.append("%s: kind must be 'leak' or 'control', not %r" % (script, kind))
        for field in ("marked_line", "marked_function"):
            if case.get(field) != scanned[field]:
                found.append("%s: %s is %r in corpus.json but %r in the script (run corpus_tools.py --write)"
                             % (script, field, case.get(field), scanned[field]))
        ranges = function_ranges(path)
        for name in case.get("site_functions", []):
            if name not in ranges:
                found.append("%s: site function %s does not exist" % (script, name))
    return found


def write_scanned(corpus, directory=CORPUS_DIR):
    for case in corpus.get("cases", []):
        if os.path.exists(os.path.join(directory, case.get("script", ""))):
            scanned = scanned_labels(case["script"], directory)
            case["marked_line"] = scanned["marked_line"]
            case["marked_function"] = scanned["marked_function"]
    return corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="list disagreements; exit 1 if any")
    action.add_argument("--write", action="store_true", help="rewrite marked_line and marked_function")
    args = parser.parse_args()
    corpus = load_corpus()
    if args.write:
        with open(CORPUS_JSON, "w", encoding="utf-8") as handle:
            json.dump(write_scanned(corpus), handle, indent=2)
            handle.write("\n")
        corpus = load_corpus()
    found = problems(corpus)
    for sentence in found:
        print(sentence)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
