"""Reads and checks examples/loops/corpus.json, the labels of the loop corpus.

Each leak program marks the line that allocates what leaks, or that keeps the
reference, with a `# LEAK:` (Python) or `// LEAK:` (CUDA C++) comment; a
program may mark more than one line when several sites leak. corpus.json
records them as `marked_lines` ("examples/loops/<program>:<line>"); this module
finds them by scanning the programs, so the labels never drift from the code:

    python3 examples/loops/labels.py --check   # exit 1 and list problems if corpus.json disagrees
    python3 examples/loops/labels.py --write   # rewrite marked_lines from the programs

Used by tests/python/test_loops_corpus.py (CPU) and tests/gpu/loops_corpus.py (GPU).
Standard library only; Python 3.8 and later.
"""
import argparse
import json
import os
import re
import sys

CORPUS_DIR = os.path.dirname(os.path.abspath(__file__))
CORPUS_JSON = os.path.join(CORPUS_DIR, "corpus.json")
REPO_RELATIVE_DIR = "examples/loops"
MARKER = re.compile(r"(#|//)\s*LEAK:")
KINDS = ("leak", "control")
VERDICTS = {"leak": "LEAK", "control": "NO LEAK"}
REQUIRED_COVERS = {
    "leak": {"evaluation-loss-summed", "evaluation-outputs-kept", "inference-cache-by-shape",
             "serving-cache-by-request", "generation-past-states", "custom-optimizer", "manual-sgd",
             "rnn-streaming-state", "gradient-accumulation", "validation-inside-training", "nested-epochs",
             "jax-loop", "cupy-loop", "cuda-cpp-loop"},
    "control": {"bounded-cache", "varying-shapes", "allocator-warmup", "empty-cache-every-iteration",
                "workspace-plateau"},
}


def load_corpus(path=CORPUS_JSON):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def corpus_programs(directory=CORPUS_DIR):
    """The case programs in the folder: leak_* and control_* .py and .cu files, sorted."""
    return sorted(name for name in os.listdir(directory)
                  if name.startswith(("leak_", "control_")) and name.endswith((".py", ".cu")))


def scan_markers(program_path):
    """The 1-based line numbers of every LEAK: marker in the program."""
    with open(program_path, encoding="utf-8") as handle:
        return [number for number, text in enumerate(handle, start=1) if MARKER.search(text)]


def marked_lines(program, directory=CORPUS_DIR):
    return ["%s/%s:%d" % (REPO_RELATIVE_DIR, program, line)
            for line in scan_markers(os.path.join(directory, program))]


def problems(corpus, directory=CORPUS_DIR):
    """Everything that makes corpus.json disagree with the programs or the issue's list, as sentences."""
    found = []
    cases = corpus.get("cases", [])
    ids = [case.get("id") for case in cases]
    for case_id in sorted(set(ids)):
        if ids.count(case_id) > 1:
            found.append("case id %s is used %d times" % (case_id, ids.count(case_id)))
    listed = {case.get("program") for case in cases}
    for program in corpus_programs(directory):
        if program not in listed:
            found.append("%s has no case in corpus.json" % program)
    for case in cases:
        program = case.get("program", "?")
        path = os.path.join(directory, program)
        if not os.path.exists(path):
            found.append("%s: %s does not exist" % (case.get("id"), program))
            continue
        kind = case.get("kind")
        if kind not in KINDS:
            found.append("%s: kind must be leak or control, not %r" % (case.get("id"), kind))
            continue
        if not program.startswith(kind + "_"):
            found.append("%s: a %s program's name starts with %s_" % (program, kind, kind))
        if case.get("expected", {}).get("verdict") != VERDICTS[kind]:
            found.append("%s: a %s expects verdict %s" % (case.get("id"), kind, VERDICTS[kind]))
        lines = marked_lines(program, directory)
        if kind == "leak" and not lines:
            found.append("%s: a leak program needs a LEAK: marker" % program)
        if kind == "control" and lines:
            found.append("%s: a control must not have a LEAK: marker" % program)
        if case.get("marked_lines") != lines:
            found.append("%s: marked_lines is %r in corpus.json but %r in the program (run labels.py --write)"
                         % (case.get("id"), case.get("marked_lines"), lines))
        sources = case.get("sources") or []
        if not sources or not all(str(url).startswith("https://") for url in sources):
            found.append("%s: needs one or more https:// source addresses" % case.get("id"))
        with open(path, encoding="utf-8") as handle:
            header = handle.read(4000)
        for url in sources:
            if url not in header:
                found.append("%s: source %s is not in the program's header" % (case.get("id"), url))
        for field in ("pattern", "covers", "framework", "iteration", "iterations", "bytes_per_iteration"):
            if case.get(field) is None:
                found.append("%s: %s is missing" % (case.get("id"), field))
        if "--iterations" not in header and "--iterations" not in open(path, encoding="utf-8").read():
            found.append("%s: the program takes no --iterations" % program)
    for kind, required in REQUIRED_COVERS.items():
        covered = {case.get("covers") for case in cases if case.get("kind") == kind}
        for missing in sorted(required - covered):
            found.append("no %s case covers %s" % (kind, missing))
    return found


def write_marked_lines(corpus, directory=CORPUS_DIR):
    for case in corpus.get("cases", []):
        if os.path.exists(os.path.join(directory, case.get("program", ""))):
            case["marked_lines"] = marked_lines(case["program"], directory)
    return corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="list disagreements; exit 1 if any")
    action.add_argument("--write", action="store_true", help="rewrite marked_lines")
    args = parser.parse_args()
    corpus = load_corpus()
    if args.write:
        with open(CORPUS_JSON, "w", encoding="utf-8") as handle:
            json.dump(write_marked_lines(corpus), handle, indent=2)
            handle.write("\n")
        corpus = load_corpus()
    found = problems(corpus)
    for sentence in found:
        print(sentence)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
