"""Reads and checks holders.json, the labels of the holder-kind corpus (examples/torch/holders/).

Each case script marks the statement that keeps the leaked memory -- the
append, the assignment, the hook registration, the decorator -- with a
`# KEPT: <statement kind>` comment. holders.json records that line as
`kept_line` ("examples/torch/holders/<script>:<line>") and the function
around it as `kept_function`; this module finds both by scanning the scripts,
so the labels never drift from the code:

    python3 examples/torch/holders/holder_labels.py --check   # exit 1 and list problems if holders.json is stale
    python3 examples/torch/holders/holder_labels.py --write   # rewrite kept_line / kept_function

Used by tests/python/test_holder_corpus.py (CPU) and tests/gpu/holder_corpus.py (GPU).
Standard library only; runs on Python 3.8 and later.
"""
import argparse
import json
import os
import re
import sys

CORPUS_DIR = os.path.dirname(os.path.abspath(__file__))
LABELS_JSON = os.path.join(CORPUS_DIR, "holders.json")
REPO_RELATIVE_DIR = "examples/torch/holders"
MARKER = re.compile(r"#\s*KEPT:\s*([a-z][a-z0-9-]*)")
STATEMENT_KINDS = ("append", "extend", "augmented-assignment", "item-assignment",
                   "attribute-assignment", "self-assignment", "closure-capture",
                   "hook-registration", "backward-create-graph", "lru-cache")

sys.path.insert(0, os.path.dirname(CORPUS_DIR))
import corpus_tools  # noqa: E402  (examples/torch/corpus_tools.py: function ranges)


def case_scripts(directory=CORPUS_DIR):
    return sorted(name for name in os.listdir(directory)
                  if name.startswith("holder_") and name.endswith(".py") and name != "holder_labels.py")


def load_labels(path=LABELS_JSON):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def scan_markers(script_path):
    """[(line, statement kind)] of every `# KEPT:` comment (1-based lines)."""
    found = []
    with open(script_path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            match = MARKER.search(text)
            if match:
                found.append((number, match.group(1)))
    return found


def scanned_labels(script, directory=CORPUS_DIR):
    path = os.path.join(directory, script)
    markers = scan_markers(path)
    if len(markers) != 1:
        return {"kept_line": None, "kept_function": None, "statement": None, "markers": markers}
    line, kind = markers[0]
    ranges = corpus_tools.function_ranges(path)
    return {"kept_line": "%s/%s:%d" % (REPO_RELATIVE_DIR, script, line),
            "kept_function": corpus_tools.enclosing_function(ranges, line),
            "statement": kind, "markers": markers}


def problems(labels, directory=CORPUS_DIR):
    found = []
    cases = labels.get("cases", [])
    listed = [case.get("script") for case in cases]
    for script in case_scripts(directory):
        if script not in listed:
            found.append("%s has no entry in holders.json" % script)
    for case in cases:
        script = case.get("script", "?")
        if not os.path.exists(os.path.join(directory, script)):
            found.append("%s is listed but does not exist" % script)
            continue
        scanned = scanned_labels(script, directory)
        if len(scanned["markers"]) != 1:
            found.append("%s: needs exactly one '# KEPT:' marker, found %d" % (script, len(scanned["markers"])))
            continue
        if scanned["statement"] not in STATEMENT_KINDS:
            found.append("%s: unknown statement kind %r" % (script, scanned["statement"]))
        if scanned["statement"] != case.get("statement"):
            found.append("%s: marker says %s, label says %s" % (script, scanned["statement"], case.get("statement")))
        expected = case.get("expected", {})
        for field in ("kept_line", "kept_function"):
            if expected.get(field) != scanned[field]:
                found.append("%s: %s is %r in holders.json but %r in the script (run holder_labels.py --write)"
                             % (script, field, expected.get(field), scanned[field]))
        if not str(case.get("reported", "")).startswith("https://"):
            found.append("%s: 'reported' must be the address of the public report" % script)
        with open(os.path.join(directory, script), encoding="utf-8") as handle:
            if case.get("reported", "-") not in handle.read(4000):
                found.append("%s: the report's address is not in the script's header" % script)
    return found


def write_scanned(labels, directory=CORPUS_DIR):
    for case in labels.get("cases", []):
        if os.path.exists(os.path.join(directory, case.get("script", ""))):
            scanned = scanned_labels(case["script"], directory)
            case.setdefault("expected", {})
            case["expected"]["kept_line"] = scanned["kept_line"]
            case["expected"]["kept_function"] = scanned["kept_function"]
    return labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="list disagreements; exit 1 if any")
    action.add_argument("--write", action="store_true", help="rewrite kept_line and kept_function")
    args = parser.parse_args()
    labels = load_labels()
    if args.write:
        with open(LABELS_JSON, "w", encoding="utf-8") as handle:
            json.dump(write_scanned(labels), handle, indent=2)
            handle.write("\n")
        labels = load_labels()
    found = problems(labels)
    for sentence in found:
        print(sentence)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
