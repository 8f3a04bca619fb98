"""The pytest plugin (gpuleak/pytest_plugin.py) in real pytest runs: a child pytest on test
files written here, with stand-in tensors that go through the allocator hook's entry points."""
import os
import subprocess
import textwrap

import pytest

from conftest import PACKAGE_DIR, PYTHON, build_dir

HERE = os.path.dirname(os.path.abspath(__file__))

TESTS = """
import pytest
from stand_in_tensors import gpu_tensor

cache = []

@pytest.mark.gpuleak_limit_leaks("1 MiB")
def test_keeps_in_a_global_list():
    cache.append(gpu_tensor(1 << 19))       # keeps 2 MiB

@pytest.mark.gpuleak_limit_leaks("1 MiB")
def test_frees_what_it_makes():
    x = gpu_tensor(1 << 19)
    assert float(x.sum()) == 0.0

@pytest.mark.gpuleak_limit_leaks("4 MiB")
def test_keeps_less_than_its_limit():
    cache.append(gpu_tensor(1 << 16))

@pytest.mark.gpuleak_limit_memory("1 MiB")
def test_peaks_above_its_limit():
    parts = [gpu_tensor(1 << 18) for _ in range(3)]

@pytest.mark.gpuleak_repeat(12)
def test_grows_when_run_again():
    cache.append(gpu_tensor(1 << 14))

@pytest.mark.gpuleak_repeat(12)
def test_same_memory_each_time():
    x = gpu_tensor(1 << 14)

@pytest.mark.gpuleak_limit_leaks("one meg")
def test_with_a_malformed_size():
    pass

def test_untracked():
    cache.append(gpu_tensor(1 << 10))
"""


@pytest.fixture
def run_pytest(tmp_path):
    cli = os.path.join(build_dir(), "gpuleak")
    collector = os.path.join(build_dir(), "libgpuleak_collector.so")
    if not (os.path.exists(cli) and os.path.exists(collector)):
        pytest.skip("no gpuleak and collector in %s (GPULEAK_BUILD_DIR)" % build_dir())

    def run(*arguments, tests=TESTS):
        (tmp_path / "test_models.py").write_text(textwrap.dedent(tests))
        env = dict(os.environ)
        for name in (
            "GPULEAK_COLLECTOR",
            "GPULEAK_TRACE_DIR",
            "GPULEAK_TORCH_MODE",
            "GPULEAK_HOLDER_REQUESTS",
            "PYTEST_ADDOPTS",
        ):
            env.pop(name, None)
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([PACKAGE_DIR, os.path.join(HERE, "tracking")]),
                "GPULEAK_BINARY": cli,
                "GPULEAK_COLLECTOR": collector,
            }
        )
        return subprocess.run(
            [
                PYTHON,
                "-m",
                "pytest",
                "-p",
                "gpuleak.pytest_plugin",
                "-p",
                "no:cacheprovider",
                "-rA",
                str(tmp_path / "test_models.py"),
            ]
            + list(arguments),
            cwd=str(tmp_path),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )

    return run


def outcomes(output):
    found = {}
    for line in output.splitlines():
        for word in ("PASSED", "FAILED"):
            if line.startswith(word + " "):
                found[line.split()[1].split("::")[-1]] = word
    return found


def failure_text(output, test):
    start = output.index("_ %s _" % test)
    end = output.find("\n____", start + 1)
    return output[start : end if end > 0 else None]


def test_markers_fail_the_tests_that_break_their_limits_with_site_holder_and_keeping_line(run_pytest):
    done = run_pytest()
    assert done.returncode == 1, done.stdout
    assert outcomes(done.stdout) == {
        "test_keeps_in_a_global_list": "FAILED",
        "test_frees_what_it_makes": "PASSED",
        "test_keeps_less_than_its_limit": "PASSED",
        "test_peaks_above_its_limit": "FAILED",
        "test_grows_when_run_again": "FAILED",
        "test_same_memory_each_time": "PASSED",
        "test_with_a_malformed_size": "FAILED",
        "test_untracked": "PASSED",
    }, done.stdout
    kept = failure_text(done.stdout, "test_keeps_in_a_global_list")
    assert "the test left 2.0 MiB of GPU memory allocated (limit 1.0 MiB)" in kept
    assert "stand_in_tensors.py" in kept  # the allocating line
    assert "held by list `cache` (module test_models)" in kept
    assert "kept at " in kept and "cache.append(gpu_tensor(1 << 19))       # keeps 2 MiB" in kept
    peak = failure_text(done.stdout, "test_peaks_above_its_limit")
    assert "peaked at 3.0 MiB (limit 1.0 MiB)" in peak
    grows = failure_text(done.stdout, "test_grows_when_run_again")
    assert "grew by 64.0 KiB per repetition over 12 repetitions" in grows
    assert "cache.append(gpu_tensor(1 << 14))" in grows
    malformed = failure_text(done.stdout, "test_with_a_malformed_size")
    assert (
        "test_models.py::test_with_a_malformed_size: @pytest.mark.gpuleak_limit_leaks"
        "('one meg'): 'one meg' is not a size" in malformed
    )


def test_the_gpuleak_option_tracks_every_test_and_lists_what_they_left(run_pytest):
    done = run_pytest("--gpuleak", "-k", "untracked or frees")
    assert done.returncode == 0, done.stdout
    summary = done.stdout[
        done.stdout.index("gpuleak: GPU memory per test") : done.stdout.index("short test summary info")
    ]
    assert "2 tests tracked, 1 left GPU memory allocated or leaked" in summary
    assert "test_models.py::test_untracked: left 4.0 KiB" in summary
    assert "test_frees_what_it_makes" not in summary


def test_under_xdist_each_worker_tracks_its_tests_and_the_summary_has_them_all(run_pytest):
    pytest.importorskip("xdist")
    done = run_pytest("-n", "2", "--gpuleak", "-k", "not malformed")
    assert done.returncode == 1, done.stdout
    summary = done.stdout[done.stdout.index("gpuleak: GPU memory per test") :]
    assert "7 tests tracked" in summary, summary
    assert "test_models.py::test_keeps_in_a_global_list: left 2.0 MiB" in summary
    assert "test_models.py::test_grows_when_run_again: LEAK +64.0 KiB/repetition" in summary


def test_a_repeat_count_below_ten_is_refused_by_name(run_pytest):
    done = run_pytest(
        tests="""
import pytest
@pytest.mark.gpuleak_repeat(3)
def test_too_few():
    pass
"""
    )
    assert done.returncode == 1
    assert "test_models.py::test_too_few: gpuleak_repeat needs at least 10 repetitions (got 3)" in done.stdout
