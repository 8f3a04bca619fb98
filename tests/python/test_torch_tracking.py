"""The torch_tracking annotation written once CUDA is initialized, in each GPULEAK_TORCH_MODE.

The CPU-only torch of CI never initializes CUDA, so these tests run the
callback gpuleak queued with torch.cuda._lazy_call the way torch's lazy init
would: that checks it was queued, and what it writes.
"""

import os
import subprocess

import pytest

from conftest import PACKAGE_DIR, PYTHON

RUN_QUEUED_CUDA_CALLBACKS = '''
import torch
queued = [c for c, _ in torch.cuda._queued_calls if getattr(c, "__module__", "") == "gpuleak._boot"]
assert len(queued) == 1, queued
queued[0]()
import gpuleak._runtime as runtime
print("sampler", type(runtime.clock().sampler).__name__)
leave_traced_program()
'''


@pytest.mark.parametrize("mode", ["off", "async"])
def test_torch_tracking_without_the_hook(run_traced, mode):
    run = run_traced(RUN_QUEUED_CUDA_CALLBACKS, {
        "GPULEAK_TORCH_MODE": mode, "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.9"})
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
    result = subprocess.run([PYTHON, "-m", "gpuleak.torch_hook", "--build"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1
    assert "built without CUDA" in result.stdout


def test_build_ahead_rejects_unknown_arguments(tmp_path):
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR, GPULEAK_CACHE_DIR=str(tmp_path))
    result = subprocess.run([PYTHON, "-m", "gpuleak.torch_hook"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 2
    assert "usage" in result.stdout
