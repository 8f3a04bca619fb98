"""scripts/tidy picks the files CI can afford and says what it did not check:
run in a small git repository of its own, with a stand-in clang-tidy where
the test is about the run rather than the choice of files."""
import os
import shutil
import subprocess
import textwrap

import pytest

ROOT = os.path.abspath(os.environ.get("GPULEAK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))


def git(repo, *args):
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env=dict(
            os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"
        ),
    )


def write(repo, path, text=""):
    full = repo / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "tidy"), tmp_path / "scripts" / "tidy")
    write(tmp_path, "build/compile_commands.json", "[]")
    write(tmp_path, ".gitignore", "build/\n")
    write(tmp_path, "src/collector/recorder.cpp")
    write(tmp_path, "src/attach/injection.cpp")
    write(tmp_path, "src/report/text_report.h")
    write(tmp_path, "src/report/text_report.cpp", '#include "report/text_report.h"\n')
    write(tmp_path, "src/cli/report_outputs.cpp", '#include "report/text_report.h"\n')
    write(tmp_path, "src/trace/codec.cpp")
    write(tmp_path, "src/lint/linter.cpp")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    git(tmp_path, "checkout", "-qb", "work")
    return tmp_path


def tidy(repo, *args, **env):
    return subprocess.run(
        ["bash", str(repo / "scripts" / "tidy"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, **env),
    )


def listed(run):
    return sorted(line for line in run.stdout.splitlines() if line.startswith("src/"))


def test_ci_checks_the_in_process_code_and_what_changed_since_main_headers_through_their_includers(repo):
    write(repo, "src/report/text_report.h", "// changed\n")
    write(repo, "src/trace/codec.cpp", "// changed\n")
    git(repo, "commit", "-qam", "change")
    write(repo, "src/trace/new_part.cpp")  # not committed yet, not ignored
    run = tidy(repo, "--list", "build")
    assert run.returncode == 0, run.stderr
    assert listed(run) == [
        "src/attach/injection.cpp",
        "src/cli/report_outputs.cpp",
        "src/collector/recorder.cpp",
        "src/report/text_report.cpp",
        "src/trace/codec.cpp",
        "src/trace/new_part.cpp",
    ]


def test_all_and_named_files(repo):
    assert len(listed(tidy(repo, "--all", "--list", "build"))) == 6
    assert listed(tidy(repo, "--list", "build", "src/lint/linter.cpp")) == ["src/lint/linter.cpp"]


def test_without_a_base_it_says_so_and_checks_the_in_process_code(repo):
    git(repo, "branch", "-qm", "main", "old")
    run = tidy(repo, "--list", "build")
    assert "no base" in run.stdout
    assert listed(run) == ["src/attach/injection.cpp", "src/collector/recorder.cpp"]


def stand_in(repo, body):
    path = repo / "fake-clang-tidy"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def test_a_finding_fails_the_run_and_names_the_file(repo):
    fake = stand_in(
        repo,
        """\
        for a; do f=$a; done
        case "$f" in *codec.cpp) echo "$f:3:1: error: invalid case style [readability-identifier-naming]"; exit 1;; esac
        """,
    )
    run = tidy(repo, "--all", "build", CLANG_TIDY=fake)
    assert run.returncode == 1, run.stdout
    assert "codec.cpp:3:1: error: invalid case style" in run.stdout
    assert "findings in 6 files" in run.stdout


def test_a_run_past_its_budget_lists_what_it_did_not_check(repo):
    fake = stand_in(repo, "sleep 2\n")
    run = tidy(repo, "--all", "build", CLANG_TIDY=fake, TIDY_BUDGET_S="1")
    assert run.returncode == 3, run.stdout + run.stderr
    skipped = run.stdout.split("not checked", 1)[1].splitlines()[1:]
    assert skipped and all(line.startswith("src/") for line in skipped)
    clean = tidy(repo, "--all", "build", CLANG_TIDY=stand_in(repo, "exit 0\n"))
    assert clean.returncode == 0 and "6 files, no findings" in clean.stdout
