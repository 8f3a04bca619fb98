"""Reads and checks examples/depth/corpus.json, the labels of the depth corpus (issue 37).

Each leak program marks the statement that keeps the leaked memory -- the
append, the assignment, the library call that is handed the memory, the
creating call of a handle or plan, the cudaMalloc -- with a `# KEEP:` (Python)
or `// KEEP:` (C++/CUDA) comment; where the keeping statement is inside a class
whose caller hands it the memory (the meter), the caller's line carries
`# KEEP-CALLER:`. Where the keeping statement is in another file than the
program (a PyTorch extension's .cu source), the case's `keep_file` names it.
corpus.json records them as `expected.keep_line` / `expected.caller_line`
("examples/depth/<file>:<line>"); this module finds them by scanning the files,
so the labels never drift from the code:

    python3 examples/depth/labels.py --check   # exit 1 and list problems if corpus.json disagrees
    python3 examples/depth/labels.py --write   # rewrite keep_line / caller_line from the programs
    python3 examples/depth/labels.py --list    # one line per case

Used by tests/gpu/depth_corpus.py (the GPU scorer). Standard library only; Python 3.8 and later.
"""
import argparse
import json
import os
import re
import sys

CORPUS_DIR = os.path.dirname(os.path.abspath(__file__))
CORPUS_JSON = os.path.join(CORPUS_DIR, "corpus.json")
REPO_RELATIVE_DIR = "examples/depth"
KEEP = re.compile(r"(#|//)\s*KEEP:")
KEEP_CALLER = re.compile(r"(#|//)\s*KEEP-CALLER:")
KINDS = ("leak", "control")
VERDICTS = {"leak": "LEAK", "control": "NO LEAK"}
LANGUAGES = ("python", "cpp")
# What issue 37's "What it must show" lists; each needs a leak and a control.
REQUIRED_COVERS = {"kept-view", "library-handle-cublas", "library-handle-cufft", "library-handle-cudnn",
                   "library-handle-nccl", "cuda-graph-exec", "cuda-graph-pool", "torch-extension", "meter-class",
                   "kept-exception", "library-prepared-objects", "slow-4kib-under-20gib", "late-start-step-300",
                   "every-50th-step"}


def load_corpus(path=CORPUS_JSON):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def corpus_programs(directory=CORPUS_DIR):
    """The case programs in the folder: leak_* and control_* .py and .cu files, sorted."""
    return sorted(name for name in os.listdir(directory)
                  if name.startswith(("leak_", "control_")) and name.endswith((".py", ".cu")))


def scan(path, pattern):
    """The 1-based line numbers of every line of the file the pattern matches."""
    with open(path, encoding="utf-8") as handle:
        return [number for number, text in enumerate(handle, start=1) if pattern.search(text)]


def keep_file(case):
    return case.get("keep_file") or case["program"]


def scanned(case, directory=CORPUS_DIR):
    """(keep_line, caller_line) as "examples/depth/<file>:<line>" (None where there is no marker), and
    the raw marker lists for checking."""
    keep_path = keep_file(case)
    keeps = scan(os.path.join(directory, keep_path), KEEP)
    callers = scan(os.path.join(directory, case["program"]), KEEP_CALLER)
    keep_line = "%s/%s:%d" % (REPO_RELATIVE_DIR, keep_path, keeps[0]) if len(keeps) == 1 else None
    caller_line = "%s/%s:%d" % (REPO_RELATIVE_DIR, case["program"], callers[0]) if len(callers) == 1 else None
    return keep_line, caller_line, keeps, callers


def line_of(label):
    """The line number of "path:line", or None."""
    if not label:
        return None
    return int(str(label).rsplit(":", 1)[1])


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
    pairs = {case.get("pair") for case in cases}
    for case in cases:
        case_id = case.get("id", "?")
        program = case.get("program", "?")
        path = os.path.join(directory, program)
        if not os.path.exists(path):
            found.append("%s: %s does not exist" % (case_id, program))
            continue
        kind = case.get("kind")
        if kind not in KINDS:
            found.append("%s: kind must be leak or control, not %r" % (case_id, kind))
            continue
        if not program.startswith(kind + "_"):
            found.append("%s: a %s program's name starts with %s_" % (program, kind, kind))
        if case.get("language") not in LANGUAGES:
            found.append("%s: language must be python or cpp" % case_id)
        if (case.get("language") == "cpp") != program.endswith(".cu"):
            found.append("%s: a cpp case is a .cu program and a python case a .py one" % case_id)
        expected = case.get("expected", {})
        if expected.get("verdict") != VERDICTS[kind]:
            found.append("%s: a %s expects verdict %s" % (case_id, kind, VERDICTS[kind]))
        if case.get("keep_file") and not os.path.exists(os.path.join(directory, case["keep_file"])):
            found.append("%s: keep_file %s does not exist" % (case_id, case["keep_file"]))
        keep_line, caller_line, keeps, callers = scanned(case, directory)
        if kind == "leak" and len(keeps) != 1:
            found.append("%s: a leak needs exactly one KEEP: marker in %s (found %d)" % (case_id, keep_file(case),
                                                                                          len(keeps)))
        if kind == "control" and (keeps or callers):
            found.append("%s: a control must not have KEEP markers" % case_id)
        if expected.get("keep_line") != keep_line:
            found.append("%s: keep_line is %r in corpus.json but %r in the files (run labels.py --write)"
                         % (case_id, expected.get("keep_line"), keep_line))
        if expected.get("caller_line") != caller_line:
            found.append("%s: caller_line is %r in corpus.json but %r in the files (run labels.py --write)"
                         % (case_id, expected.get("caller_line"), caller_line))
        sources = case.get("sources") or []
        if not sources or not all(str(url).startswith("https://") for url in sources):
            found.append("%s: needs one or more https:// source addresses" % case_id)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        header = text[:5000]
        for url in sources:
            if url not in header:
                found.append("%s: source %s is not in the program's header" % (case_id, url))
        if "--steps" not in text:
            found.append("%s: the program takes no --steps" % program)
        for field in ("covers", "pattern", "step", "steps", "bytes_per_step", "pair"):
            if case.get(field) is None:
                found.append("%s: %s is missing" % (case_id, field))
        if case.get("pair") not in ids:
            found.append("%s: its pair %s is not a case" % (case_id, case.get("pair")))
        if kind == "leak":
            if not expected.get("must_not_contain"):
                found.append("%s: a leak lists the words its report must not contain" % case_id)
            api = expected.get("creating_api")
            if api and not expected.get("destroy_call"):
                found.append("%s: a creating API needs its destroy call" % case_id)
            view = expected.get("view")
            if view and not (view.get("base_bytes") and view.get("own_bytes")):
                found.append("%s: a view case gives base_bytes and own_bytes" % case_id)
    del pairs
    for kind in KINDS:
        covered = {case.get("covers") for case in cases if case.get("kind") == kind}
        for missing in sorted(REQUIRED_COVERS - covered):
            found.append("no %s case covers %s" % (kind, missing))
    return found


def write_lines(corpus, directory=CORPUS_DIR):
    for case in corpus.get("cases", []):
        if os.path.exists(os.path.join(directory, case.get("program", ""))):
            keep_line, caller_line, _, _ = scanned(case, directory)
            case.setdefault("expected", {})
            case["expected"]["keep_line"] = keep_line
            case["expected"]["caller_line"] = caller_line
    return corpus


def describe(case):
    expected = case.get("expected", {})
    return "%-44s %-7s %-6s %-8s %-26s %s" % (case["id"], case["kind"], case["language"], expected.get("verdict"),
                                              case.get("covers"), expected.get("keep_line") or "-")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="list disagreements; exit 1 if any")
    action.add_argument("--write", action="store_true", help="rewrite keep_line / caller_line")
    action.add_argument("--list", action="store_true", help="one line per case")
    args = parser.parse_args()
    corpus = load_corpus()
    if args.list:
        for case in corpus["cases"]:
            print(describe(case))
        return 0
    if args.write:
        with open(CORPUS_JSON, "w", encoding="utf-8") as handle:
            json.dump(write_lines(corpus), handle, indent=2)
            handle.write("\n")
        corpus = load_corpus()
    found = problems(corpus)
    for sentence in found:
        print(sentence)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
