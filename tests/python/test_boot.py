"""The boot: sitecustomize chaining, the torch import watcher, and its cost when unused."""

import os
import subprocess
import textwrap

from conftest import BOOT_DIR, PACKAGE_DIR, PYTHON


def run_python(code, tmp_path, collector="/nonexistent/libgpuleak_collector.so", extra_path=(), extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK_")}
    env["PYTHONPATH"] = os.pathsep.join([BOOT_DIR, *extra_path, PACKAGE_DIR])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if collector:
        env["GPULEAK_COLLECTOR"] = collector
        env["GPULEAK_TRACE_DIR"] = str(tmp_path / "traces")
    env.update(extra_env or {})
    return subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def gpuleak_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("gpuleak:")]


def test_next_sitecustomize_on_the_path_still_runs(tmp_path):
    other = tmp_path / "other_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITECUSTOMIZE_RAN = __name__\n")
    result = run_python(
        "import builtins; print(getattr(builtins, 'OTHER_SITECUSTOMIZE_RAN', None))", tmp_path, extra_path=[str(other)]
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sitecustomize"


def test_next_sitecustomize_runs_without_a_collector_too(tmp_path):
    other = tmp_path / "other_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("print('other sitecustomize')\n")
    result = run_python("pass", tmp_path, collector=None, extra_path=[str(other)])
    assert result.stdout.strip() == "other sitecustomize"


def test_a_failing_next_sitecustomize_costs_one_line_and_the_program_runs(tmp_path):
    other = tmp_path / "other_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("raise RuntimeError('broken site')\n")
    result = run_python("print('program ran')", tmp_path, extra_path=[str(other)])
    assert result.returncode == 0
    assert result.stdout.strip() == "program ran"
    lines = gpuleak_lines(result)
    assert len(lines) == 1 and "broken site" in lines[0]


def test_without_collector_the_package_is_not_even_imported(tmp_path):
    result = run_python(
        """
        import sys
        print(sorted(m for m in sys.modules if m.startswith("gpuleak")))
        print([type(f).__name__ for f in sys.meta_path])
    """,
        tmp_path,
        collector=None,
    )
    assert result.returncode == 0, result.stderr
    modules, finders = result.stdout.splitlines()
    assert modules == "[]"
    assert "TorchImportWatcher" not in finders


def test_a_program_that_never_imports_torch_loads_nothing_heavy(tmp_path):
    result = run_python(
        """
        import sys, json, email.parser  # ordinary imports pass the watcher
        heavy = ["ctypes", "torch", "gpuleak.holders", "gpuleak._collector", "gpuleak._steps",
                 "gpuleak.torch_hook"]
        print([m for m in heavy if m in sys.modules])
        print([type(f).__name__ for f in sys.meta_path][0])
    """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    loaded, first_finder = result.stdout.splitlines()
    assert loaded == "[]"
    assert first_finder == "TorchImportWatcher"
    assert gpuleak_lines(result) == []


def test_unloadable_collector_costs_one_line_and_training_runs(tmp_path):
    result = run_python(
        """
        import torch
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(4, 2)).sum().backward(); opt.step()
        print("trained")
    """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "trained" in result.stdout
    lines = gpuleak_lines(result)
    assert len(lines) == 1 and "cannot load the collector" in lines[0]


def test_torch_import_is_watched_and_the_loader_left_as_it_was(tmp_path, collector_path):
    result = run_python(
        """
        import importlib.util, sys
        assert importlib.util.find_spec("torch") is not None  # probing first, as libraries do
        import torch
        print([type(f).__name__ for f in sys.meta_path])
        print(type(torch.__loader__).__name__, "exec_module" in vars(torch.__loader__),
              torch.__spec__.loader is torch.__loader__)
        print(len([c for c, _ in torch.cuda._queued_calls
                   if getattr(c, "__module__", "") == "gpuleak._boot"]))
        import gpuleak._runtime as runtime
        print(runtime._clock is not None)
    """,
        tmp_path,
        collector=collector_path,
    )
    assert result.returncode == 0, result.stderr
    finders, loader, queued, clock_made = result.stdout.splitlines()
    assert "TorchImportWatcher" not in finders
    assert loader == "SourceFileLoader False True"
    assert queued == "1"
    assert clock_made == "True"


def test_missing_package_costs_one_line_and_the_program_runs(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK_")}
    env.update(PYTHONPATH=BOOT_DIR, GPULEAK_COLLECTOR="/nonexistent.so", PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [PYTHON, "-c", "print('program ran')"],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout.strip() == "program ran"
    lines = gpuleak_lines(result)
    assert len(lines) == 1 and "could not start" in lines[0] and "gpuleak" in lines[0]
