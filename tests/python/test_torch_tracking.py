"""The torch_tracking annotation written once CUDA is initialized, in each GPULEAK_TORCH_MODE.

The CPU-only torch of CI never initializes CUDA, so these tests run the
callback gpuleak queued with torch.cuda._lazy_call the way torch's lazy init
would: that checks it was queued, and what it writes.
"""

import json
import os
import subprocess

import pytest

from conftest import PACKAGE_DIR, PYTHON

RUN_QUEUED_CUDA_CALLBACKS = """
import torch
queued = [c for c, _ in torch.cuda._queued_calls if getattr(c, "__module__", "") == "gpuleak._boot"]
assert len(queued) == 1, queued
queued[0]()
import gpuleak._runtime as runtime
print("sampler", type(runtime.clock().sampler).__name__)
leave_traced_program()
"""


@pytest.mark.parametrize("mode", ["off", "async"])
def test_torch_tracking_without_the_hook(run_traced, mode):
    run = run_traced(
        RUN_QUEUED_CUDA_CALLBACKS,
        {"GPULEAK_TORCH_MODE": mode, "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.9"},
    )
    assert run.returncode == 0, run.stderr
    assert "sampler MemorySampler" in run.stdout
    import torch

    tracking = run.annotations("torch_tracking")
    assert len(tracking) == 1
    assert tracking[0]["mode"] == "driver-only"
    assert tracking[0]["torch"] == torch.__version__
    assert tracking[0]["alloc_conf"] == "garbage_collection_threshold:0.9"
    if mode == "off":
        assert tracking[0]["hook_error"] is None
    else:  # gpuleak asked for cudaMallocAsync, but torch runs its native allocator
        assert "native" in tracking[0]["hook_error"]


def test_torch_tracking_reports_why_the_hook_failed(run_traced):
    # CPU-only torch has no CUDA allocator library to build the shim against.
    run = run_traced(RUN_QUEUED_CUDA_CALLBACKS, {"GPULEAK_TORCH_MODE": "hook"}, timeout=300)
    assert run.returncode == 0, run.stderr
    tracking = run.annotations("torch_tracking")
    assert len(tracking) == 1
    assert tracking[0]["mode"] == "driver-only"
    assert tracking[0]["hook_error"]
    lines = run.gpuleak_lines()
    assert any("allocator hook is off" in line for line in lines), lines
    assert len(lines) <= 2  # "building ..." then "... is off (why)"


def test_build_ahead_says_clearly_why_it_cannot_build_on_cpu_torch(tmp_path):
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR, GPULEAK_CACHE_DIR=str(tmp_path))
    result = subprocess.run(
        [PYTHON, "-m", "gpuleak.torch_hook", "--build"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "built without CUDA" in result.stdout


def test_build_ahead_finds_a_built_hook_without_importing_torch(tmp_path):
    # `gpuleak run` asks before every Python program; importing torch to
    # answer took seconds, also for a program that never uses torch.
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR, GPULEAK_CACHE_DIR=str(tmp_path))
    probe = subprocess.run(
        [
            PYTHON,
            "-c",
            """
import sys
from gpuleak import torch_hook
found = torch_hook.installed_shim_path()
print("torch" in sys.modules)
import torch
print(found == torch_hook.shim_path(torch))
print(found)
""",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    imported_early, same, path = probe.stdout.splitlines()
    assert imported_early == "False"
    assert same == "True", "the hook is looked for where torch's own version puts it"
    with open(path, "wb"):
        pass  # as if built before
    result = subprocess.run(
        [
            PYTHON,
            "-c",
            """
import runpy, sys
sys.argv = ["torch_hook", "--build"]
try:
    runpy.run_module("gpuleak.torch_hook", run_name="__main__")
except SystemExit as end:
    print("exit", end.code)
print("torch imported", "torch" in sys.modules)
""",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "exit 0" in result.stdout
    assert "torch imported False" in result.stdout
    assert "allocator hook is built" in result.stdout


def test_build_ahead_rejects_unknown_arguments(tmp_path):
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR, GPULEAK_CACHE_DIR=str(tmp_path))
    result = subprocess.run(
        [PYTHON, "-m", "gpuleak.torch_hook"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "usage" in result.stdout


# ---- torch 2.x paths, with stand-ins (CI has torch 1.13) ------------------------

import types

from gpuleak import _boot
from gpuleak._steps import StepClock


class FakeCollector:
    def __init__(self):
        self.library = object()
        self.annotations = []
        self.marked = []

    def annotate(self, key, value):
        self.annotations.append((key, value))

    def mark_clock_step(self, step, source, clock, pacing):
        self.marked.append((step, source))

    def record_sample(self, metric, device, value):
        pass


def fake_torch(backend="native"):
    hooks = {"pre": [], "post": []}
    optimizer_module = types.SimpleNamespace(
        register_optimizer_step_pre_hook=hooks["pre"].append, register_optimizer_step_post_hook=hooks["post"].append
    )
    cuda = types.SimpleNamespace(get_allocator_backend=lambda: backend)
    torch = types.SimpleNamespace(
        __version__="2.11.0+cu130",
        cuda=cuda,
        _C=types.SimpleNamespace(),
        optim=types.SimpleNamespace(optimizer=optimizer_module),
    )
    return torch, hooks


def test_torch_2_global_hooks_are_registered_and_mark_steps():
    torch, hooks = fake_torch()
    collector = FakeCollector()
    clock = StepClock(collector)
    _boot.register_step_hooks(torch, clock)
    assert len(hooks["pre"]) == 1 and len(hooks["post"]) == 1
    optimizer = types.SimpleNamespace()
    for _ in range(3):
        assert hooks["pre"][0](optimizer, (), {}) is None  # a pre-hook must not change arguments
        hooks["post"][0](optimizer, (), {})
    assert collector.marked == [(1, 1), (2, 1), (3, 1)]


def test_cuda_callback_in_hook_mode_reports_the_attached_hook(monkeypatch):
    torch, _ = fake_torch()
    collector = FakeCollector()
    clock = StepClock(collector)
    monkeypatch.setenv("GPULEAK_TORCH_MODE", "hook")
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setattr(_boot, "attach_allocator_hook", lambda t, c: (True, "/cache/shim.so"))
    _boot.on_cuda_initialized(torch, collector, clock)
    ((key, value),) = collector.annotations
    assert key == "torch_tracking"
    assert json.loads(value) == {
        "mode": "allocator-hook",
        "alloc_conf": "",
        "torch": "2.11.0+cu130",
        "hook_error": None,
    }
    assert clock.sampler is not None and clock.sampler.pool_backend is False


def test_cuda_callback_with_the_async_backend_samples_the_pool(monkeypatch):
    torch, _ = fake_torch(backend="cudaMallocAsync")
    collector = FakeCollector()
    clock = StepClock(collector)
    monkeypatch.setenv("GPULEAK_TORCH_MODE", "async")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync")
    monkeypatch.setattr(_boot, "attach_allocator_hook", lambda t, c: pytest.fail("no tracker with the async backend"))
    _boot.on_cuda_initialized(torch, collector, clock)
    tracking = json.loads(collector.annotations[0][1])
    assert tracking["mode"] == "cudaMallocAsync" and tracking["hook_error"] is None
    assert tracking["alloc_conf"] == "backend:cudaMallocAsync"
    assert clock.sampler.pool_backend is True


def test_cuda_callback_never_raises_into_torch(monkeypatch, capsys):
    collector = FakeCollector()
    monkeypatch.setenv("GPULEAK_TORCH_MODE", "hook")

    def broken_attach(torch, collector):
        raise RuntimeError("shim exploded")

    monkeypatch.setattr(_boot, "attach_allocator_hook", broken_attach)
    torch, _ = fake_torch()
    _boot.on_cuda_initialized(torch, collector, StepClock(collector))  # must not raise
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("gpuleak:")]
    assert len(lines) == 1 and "shim exploded" in lines[0]


def test_hook_error_keeps_the_compiler_message_and_stderr_gets_its_error_line(monkeypatch, capsys):
    torch, _ = fake_torch()
    collector = FakeCollector()
    monkeypatch.setenv("GPULEAK_TORCH_MODE", "user")
    message = (
        "building the PyTorch allocator hook failed:\nIn file included from x.h:1,\n"
        "x.h:8:10: fatal error: cuda_runtime_api.h: No such file or directory"
    )
    monkeypatch.setattr(_boot, "attach_allocator_hook", lambda t, c: (False, message))
    _boot.on_cuda_initialized(torch, collector, StepClock(collector))
    tracking = json.loads(collector.annotations[0][1])
    assert tracking["mode"] == "driver-only" and tracking["hook_error"] == message
    err = capsys.readouterr().err
    assert "fatal error: cuda_runtime_api.h" in err
