"""One name for one idea in the docs: docs/glossary.md names each term once and
lists the names it must not go by (its "not" column); no page of docs/ and not
the README uses one of those in its prose. Backticks and double quotes quote
code or output, which the glossary's last section tracks, so they are left out.
"""
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.abspath(os.environ.get("GPULEAK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
GLOSSARY = os.path.join(ROOT, "docs", "glossary.md")


def other_meanings(text):
    """The phrases of the glossary's "Other meanings" section, in backticks."""
    section = text.split("## Other meanings", 1)[1].split("\n## ", 1)[0] if "## Other meanings" in text else ""
    return re.findall(r"`([^`]+)`", section)


def glossary_rows(text):
    """{name: [rejected words]} from the glossary's Terms table."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("name", "") or set(cells[0]) <= set("-"):
            continue
        rows[cells[0]] = re.findall(r"`([^`]+)`", cells[3])
    return rows


def prose(text):
    """The page's text with code blocks, inline code, double-quoted text and
    link targets blanked out, each line where it was (a quote may go on to
    the next line of its paragraph)."""

    def blank(match):
        return "\n" * match.group(0).count("\n")

    text = re.sub(r"^[ \t]*```.*?^[ \t]*```[^\n]*$", blank, text, flags=re.M | re.S)
    for quoted in (r"`[^`]*(?:\n[^`\n]+)*`", r"\"[^\"\n]*(?:\n[^\"\n]+)*\"", r"“[^”]*”"):
        text = re.sub(quoted, lambda match: " " + blank(match), text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def misuses(rows, pages, allowed=()):
    """['page:line: word (say NAME)'] for every rejected word in the pages' prose
    outside the `allowed` phrases."""

    # A word in capitals (a verdict word) is rejected as written; others in
    # any case, so a sentence's first word counts too. A phrase may break across lines.
    def phrase_pattern(words, flags):
        return re.compile(r"(?<![\w-])%s(?![\w-])" % r"\s+".join(map(re.escape, words.split())), flags)

    patterns = [
        (name, word, phrase_pattern(word, 0 if word.isupper() else re.I))
        for name, words in rows.items()
        for word in words
    ]
    found = []
    for page, text in pages:
        visible = prose(text)
        for phrase in allowed:
            visible = phrase_pattern(phrase, re.I).sub(lambda match: re.sub(r"\S", " ", match.group(0)), visible)
        for name, word, pattern in patterns:
            for match in pattern.finditer(visible):
                number = visible.count("\n", 0, match.start()) + 1
                found.append("%s:%d: %r (the glossary's name: %s)" % (page, number, word, name))
    return found


def doc_pages():
    pages = [("README.md", os.path.join(ROOT, "README.md"))]
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        for name in sorted(files):
            path = os.path.join(folder, name)
            if name.endswith(".md") and path != GLOSSARY:
                pages.append((os.path.relpath(path, ROOT), path))
    result = []
    for page, path in pages:
        with open(path, encoding="utf-8") as f:
            result.append((page, f.read()))
    return result


def test_the_glossary_has_its_terms_each_once_with_the_names_they_must_not_go_by():
    with open(GLOSSARY, encoding="utf-8") as f:
        text = f.read()
    rows = glossary_rows(text)
    for term in (
        "step",
        "step boundary",
        "site",
        "stack",
        "holder",
        "keeping line",
        "verdict",
        "growth",
        "live set",
        "trace",
        "compaction",
        "orphan",
        "worker context",
    ):
        assert term in rows, "docs/glossary.md has no row for %r" % term
    names = [
        line.split("|")[1].strip()
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| name")
    ]
    assert len(names) == len(set(names)), "a term has two rows"
    rejected = [word.lower() for words in rows.values() for word in words]
    assert len(rejected) == len(set(rejected)), "a rejected name belongs to two terms"
    assert not set(rejected) & {name.lower() for name in rows}, "a term's name is another's rejected one"


def test_docs_call_each_idea_by_its_glossary_name():
    with open(GLOSSARY, encoding="utf-8") as f:
        text = f.read()
    found = misuses(glossary_rows(text), doc_pages(), other_meanings(text))
    assert not found, "docs use names docs/glossary.md rejects:\n" + "\n".join(found)


def test_the_check_finds_a_rejected_name_in_prose_and_not_in_quotes_or_code(tmp_path):
    # The same check in a child process over a small tree of its own: a page
    # that says "iteration" in prose fails, quoting it does not.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "glossary.md").write_text(
        textwrap.dedent(
            """\
        | name | what | code | not |
        |---|---|---|---|
        | step | a repetition | `kStep` | `iteration`, `tick` |
        """
        )
    )
    (tmp_path / "README.md").write_text(
        'The phase is "iterations of the\nloop"; `IterationFinder`.\n' "```\niteration 3\n```\n"
    )
    (docs / "page.md").write_text("Each step is marked.\nGrowth per iteration of the loop.\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            os.path.abspath(__file__) + "::test_docs_call_each_idea_by_its_glossary_name",
        ],
        env=dict(os.environ, GPULEAK_SOURCE_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "docs/page.md:2: 'iteration'" in run.stdout
    assert "README.md" not in run.stdout.split("docs use names")[1]
