"""One name for one idea: the vocabulary of include/gpuleak/vocabulary.h (metric
ids, step sources, frameworks, the causes users read) agrees with the C++ that
uses it, the Python package's copy and the docs that list it; and no source
spells a cause name outside the table."""
import ast
import os
import re

import pytest

ROOT = os.path.abspath(os.environ.get("GPULEAK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
HEADER = os.path.join(ROOT, "include", "gpuleak", "vocabulary.h")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def x_macro(name):
    """[(NAME, value, text...)] of `#define NAME(X) X(...) \\ ...` in the header."""
    text = read("include", "gpuleak", "vocabulary.h")
    match = re.search(r"#define %s\(X\)((?:.*\\\n)*.*\n)" % name, text)
    assert match, "%s is not defined in %s" % (name, HEADER)
    body = match.group(1).replace("\\\n", " ")
    entries = []
    for args in re.findall(r"X\(([^()]*)\)", body):
        parts = [p.strip() for p in re.findall(r'\s*("[^"]*"|[^,]+)', args)]
        entries.append(tuple(ast.literal_eval(p) if p[0] in '"0123456789' else p for p in parts))
    assert entries, name
    return entries


def python_vocabulary():
    tree = ast.parse(read("python", "gpuleak", "_vocabulary.py"))
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


@pytest.mark.parametrize(
    "macro,prefix",
    [("GPULEAK_METRICS", "METRIC_"), ("GPULEAK_STEP_SOURCES", "STEP_FROM_"), ("GPULEAK_FRAMEWORKS", "FRAMEWORK_")],
)
def test_python_ids_are_the_headers(macro, prefix):
    header = {prefix + name: value for name, value, _ in x_macro(macro)}
    python = {k: v for k, v in python_vocabulary().items() if k.startswith(prefix)}
    assert python == header, "python/gpuleak/_vocabulary.py and %s disagree on %s" % (HEADER, macro)


def test_ids_are_unique_within_each_list():
    for macro in ("GPULEAK_METRICS", "GPULEAK_STEP_SOURCES", "GPULEAK_FRAMEWORKS"):
        ids = [value for _, value, _ in x_macro(macro)]
        assert len(ids) == len(set(ids)), macro


def test_python_causes_are_the_headers_in_order():
    header = [(slug, title) for _, slug, title in x_macro("GPULEAK_CAUSES")]
    python = list(python_vocabulary()["CAUSES"].items())
    assert python == header


def test_holder_words_each_belong_to_a_cause_and_are_the_ones_the_walk_returns():
    vocabulary = python_vocabulary()
    causes = vocabulary["CAUSES"]
    holding = vocabulary["HOLDING_CAUSE"]
    assert set(holding.values()) <= set(causes)
    returned = set(re.findall(r'return \(\s*"([a-z-]+)"', read("python", "gpuleak", "holders", "diagnosis.py")))
    assert returned == set(holding), "the holder walk's words and HOLDING_CAUSE differ"
    # docs/python.md lists the same words for the holder's `cause`.
    row = next(line for line in read("docs", "python.md").splitlines() if line.startswith("| `cause` |"))
    assert set(re.findall(r"`([a-z-]+)`", row.split("|")[2])) == set(holding)


def test_trace_enums_take_their_values_from_the_header():
    records = read("src", "trace", "records.h")
    for enum, macro, prefix in (
        ("Metric", "GPULEAK_METRICS", "GPULEAK_METRIC_"),
        ("StepSource", "GPULEAK_STEP_SOURCES", "GPULEAK_STEP_FROM_"),
    ):
        body = re.search(r"enum class %s : std::uint8_t \{(.*?)\};" % enum, records, re.S).group(1)
        used = re.findall(r"=\s*(GPULEAK_[A-Z_]+)", body)
        assert sorted(used) == sorted(prefix + name for name, _, _ in x_macro(macro)), enum
        assert not re.search(r"=\s*[0-9]", body), "trace::%s spells a number instead of the header's id" % enum


def test_docs_list_the_metrics_and_causes_of_the_header():
    metrics = {text: value for _, value, text in x_macro("GPULEAK_METRICS")}
    table = dict(re.findall(r"^\| ([a-z_]+_bytes) \| ([0-9]+) \|", read("docs", "trace-format.md"), re.M))
    assert {k: int(v) for k, v in table.items()} == metrics, "docs/trace-format.md's Metric table"
    slugs = {slug for _, slug, _ in x_macro("GPULEAK_CAUSES")}
    schema_row = next(line for line in read("docs", "json-schema.md").splitlines() if line.startswith("| `cause` |"))
    lint_line = next(line for line in read("docs", "lint.md").splitlines() if line.strip().startswith("- `cause`:"))
    for where, text in (("docs/json-schema.md", schema_row), ("docs/lint.md", lint_line)):
        named = set(re.findall(r'[`"]([a-z]+(?:-[a-z]+)+)[`"]', text))
        assert named and named <= slugs, "%s names causes the vocabulary does not have: %s" % (
            where,
            sorted(named - slugs),
        )


def test_no_source_spells_a_cause_outside_the_table():
    slugs = [slug for _, slug, _ in x_macro("GPULEAK_CAUSES")]
    pattern = re.compile(r'"(%s)"' % "|".join(map(re.escape, slugs)))
    found = []
    for top in ("src", "python/gpuleak"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)
                if not name.endswith((".cpp", ".h", ".c", ".py", ".js")) or rel == "python/gpuleak/_vocabulary.py":
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        code = line.split("//")[0] if not name.endswith(".py") else line
                        if pattern.search(code):
                            found.append("%s:%d: %s" % (rel, number, line.strip()))
    assert not found, "cause names spelled outside include/gpuleak/vocabulary.h:\n" + "\n".join(found)


def test_docs_list_every_step_source_of_the_header_in_their_order_of_trust():
    names = [text for _, _, text in x_macro("GPULEAK_STEP_SOURCES")]
    schema_row = next(
        line for line in read("docs", "json-schema.md").splitlines() if line.startswith("| `step_source` |")
    )
    assert set(re.findall(r"`([a-z]+(?:-[a-z]+)*)`", schema_row.split("|")[2])) >= set(
        names
    ), "docs/json-schema.md's step_source row misses a step source"
    # docs/torch.md's "Steps" table: | order | `name` | ... in trust order,
    # the order src/analysis/steps/clock_arbiter.cpp's trust_rank gives.
    table = re.findall(r"^\| ([0-9]+) \| `([a-z-]+)` \|", read("docs", "torch.md"), re.M)
    assert sorted(name for _, name in table) == sorted(names), "docs/torch.md's order-of-trust table"
    arbiter = read("src", "analysis", "steps", "clock_arbiter.cpp")
    ranks = {}
    for name, value, text in x_macro("GPULEAK_STEP_SOURCES"):
        enumerator = "k" + "".join(part.capitalize() for part in name.split("_"))
        enumerator = {"kDataloader": "kDataLoader"}.get(enumerator, enumerator)
        match = re.search(r"case trace::StepSource::%s:\s*return ([0-9]+);" % enumerator, arbiter)
        assert match, "trust_rank has no case for %s" % enumerator
        ranks[text] = int(match.group(1))
    documented = [name for _, name in sorted(table, key=lambda row: int(row[0]))]
    assert documented == sorted(
        names, key=lambda text: ranks[text]
    ), "docs/torch.md's order of trust differs from trust_rank in clock_arbiter.cpp"


def test_the_pool_site_id_is_the_headers():
    match = re.search(r"#define GPULEAK_POOL_SITE_ID (0x[0-9a-f]+)u", read("include", "gpuleak", "vocabulary.h"))
    assert match and python_vocabulary()["POOL_SITE_ID"] == int(match.group(1), 16)
