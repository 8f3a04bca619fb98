"""`gpuleak run` on jobs of real child processes: roles, first CUDA use, device memory, findings.

Each test runs a scenario of tests/python/process_scenarios/ under the gpuleak
binary built here. The processes' GPU use is played through the collector and
the stand-in CUPTI (a context and allocations, with Python stacks), and the
driver's per-process memory figures come from the stand-in NVML, whose state
file the processes edit as they start and end (stand_in_gpu.py). Everything
else is real: multiprocessing's spawn and fork children, a torch DataLoader
with CPU tensors (Debian's torch), zombies, a parent killed by SIGTERM, the
grace period. The JSON report (schema gpuleak-report/1, its "job" object) is
what is checked.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import PACKAGE_DIR, PYTHON, build_dir

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "process_scenarios")


def built(name):
    path = os.path.join(build_dir(), name)
    if not os.path.exists(path):
        pytest.skip("%s is not built here (cmake --build %s)" % (name, build_dir()))
    return path


def assert_program_succeeded(status, text):
    """The scenario's main program succeeded; it ends with os._exit (stand_in_gpu.leave:
    the collector can hang in its exit handler under the stand-ins), so its trace has no
    exit record and `run` says so with exit status 3 (docs/cli.md) -- or 0 when a
    scenario's main never started the collector."""
    if "has no exit record" in text:
        assert status == 3, text[-2000:]
    else:
        assert status == 0, text[-2000:]


@pytest.fixture
def gpuleak_run(tmp_path, collector_path):
    """Runs a scenario under `gpuleak run`; returns (exit status, report, truth, text)."""
    gpuleak = built("gpuleak")
    cupti = built("libcupti.so.stand-in")
    nvml = built("libgpuleak_stand_in_nvml.so")
    state = tmp_path / "nvml-state"
    state.write_text("device GPU-stand-in 100000000000 0 0 Stand-in GPU\n")
    started = []

    def run(script, *args, grace=5.0, timeout=90, html=None):
        truth = tmp_path / "truth.json"
        report = tmp_path / "report.json"
        env = dict(
            os.environ,
            GPULEAK_CUPTI_LIBRARY=cupti,
            GPULEAK_NVML_LIBRARY=nvml,
            GPULEAK_STAND_IN_NVML_STATE=str(state),
            GPULEAK_PROCESS_SAMPLE_MS="100",
            PYTHONPATH=os.pathsep.join([SCENARIOS, PACKAGE_DIR]),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.pop("CUDA_INJECTION64_PATH", None)
        command = [
            gpuleak,
            "run",
            "--no-live",
            "--backend",
            "cupti",
            "--torch-mode",
            "off",
            "--orphan-grace",
            str(grace),
            "-o",
            str(tmp_path / "traces"),
            "--json-report",
            str(report),
        ]
        command += ["--html", str(html)] if html else []
        command += ["--", PYTHON, os.path.join(SCENARIOS, script)]
        command += [str(truth) if a == "TRUTH" else str(a) for a in args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        data = json.loads(truth.read_text()) if truth.exists() else {}
        for value in data.values():
            started.extend(value if isinstance(value, list) else [value])
        assert report.exists(), done.stderr[-3000:]
        return done.returncode, json.loads(report.read_text()), data, done.stderr

    yield run
    for pid in started:  # an orphan the scenario left on purpose
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def job_processes(report):
    return {p["pid"]: p for p in report["job"]["processes"]}


def findings(report, kind):
    return [f for f in report["job"]["findings"] if f["kind"] == kind]


def test_dataloader_workers_that_use_the_gpu_are_named_with_their_context(gpuleak_run):
    status, report, truth, text = gpuleak_run("dataloader_workers.py", "TRUTH")
    assert_program_succeeded(status, text)
    processes = job_processes(report)
    workers = truth["dataloader_worker"]
    assert processes[truth["main"]]["role"] == "main"
    assert not processes[truth["main"]]["cuda_initialized"]  # the parent never used the GPU
    for pid in workers:
        worker = processes[pid]
        assert worker["role"] == "dataloader_worker", worker
        assert worker["role_text"].endswith("of PID %d" % truth["main"])
        # The innermost frame outside the stand-in driver is the Dataset's line.
        [caller] = [
            f
            for f in worker["cuda_first_use"]["frames"]
            if f["language"] == "python" and f["file"].endswith("dataloader_workers.py")
        ][:1]
        assert caller["function"] == "GpuDataset.__getitem__", worker["cuda_first_use"]
        memory = worker["device_memory"]
        # The context is what the driver counts beyond the allocations gpuleak saw.
        # (the two are sampled at slightly different moments: a MiB or two apart)
        assert abs(memory["context_and_modules_bytes"] - (300 << 20)) <= 4 << 20, memory
        assert memory["peak_used_bytes"] >= (300 << 20) + (1 << 20)
    [finding] = findings(report, "worker_context")
    assert sorted(finding["pids"]) == sorted(workers)
    assert finding["of_pid"] == truth["main"]
    assert finding["cuda_first_use_in"] == "dataset"
    assert "Dataset" in finding["fix"]
    assert finding["summary"].startswith(
        "2 DataLoader workers of PID %d created their own CUDA " "context" % truth["main"]
    )
    assert "PROCESSES: 2 DataLoader workers" in text
    # `gpuleak report` of the folder reads processes.jsonl and says the same.
    again = subprocess.run(
        [built("gpuleak"), "report", "--json", os.path.dirname(report["processes"][0]["trace"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["job"]["findings"][0]["pids"] == finding["pids"]


def test_idle_pool_workers_holding_a_context_are_a_finding(gpuleak_run):
    status, report, truth, text = gpuleak_run("pool_idle.py", "TRUTH", "4")
    assert_program_succeeded(status, text)
    processes = job_processes(report)
    for pid in truth["pool_worker"]:
        assert processes[pid]["role"] == "pool_worker", processes[pid]
    [finding] = findings(report, "idle_worker_context")
    assert sorted(finding["pids"]) == sorted(truth["pool_worker_with_gpu"])
    assert finding["seconds"] >= 3.0
    assert "maxtasksperchild" in finding["fix"]


def test_pool_closed_right_after_its_work_is_no_finding(gpuleak_run):
    status, report, truth, text = gpuleak_run("pool_idle.py", "TRUTH", "0")
    assert_program_succeeded(status, text)
    assert report["job"]["findings"] == [], report["job"]["findings"]


def test_a_child_still_running_after_the_main_program_returned_is_named(gpuleak_run):
    status, report, truth, text = gpuleak_run("child_after_return.py", "left-running", "TRUTH", "3")
    assert_program_succeeded(status, text)
    [child] = truth["multiprocessing_worker"]
    assert job_processes(report)[child]["role"] == "multiprocessing_worker"
    [finding] = findings(report, "left_running")
    assert finding["pids"] == [child]
    assert finding["seconds"] >= 2.0
    assert findings(report, "orphan") == []


def test_a_child_alive_after_the_grace_period_is_an_orphan_with_its_memory(gpuleak_run):
    status, report, truth, text = gpuleak_run("child_after_return.py", "orphan", "TRUTH", "12", grace=1.5)
    assert status == 128 + signal.SIGTERM, text[-2000:]
    [child] = truth["multiprocessing_worker"]
    [finding] = findings(report, "orphan")
    assert finding["pids"] == [child]
    assert finding["bytes_total"] == (300 << 20) + (4 << 20)
    assert "gpuleak doctor --kill-orphans" in finding["summary"]
    assert job_processes(report)[child]["alive_at_end"]
    assert "still running after the main program exited" in text
    os.kill(child, signal.SIGKILL)


def test_a_child_that_ends_within_the_grace_period_is_no_orphan(gpuleak_run):
    started = time.monotonic()
    status, report, truth, text = gpuleak_run("child_after_return.py", "orphan", "TRUTH", "1.5", grace=8)
    assert status == 128 + signal.SIGTERM, text[-2000:]
    assert findings(report, "orphan") == [], report["job"]["findings"]
    [child] = truth["multiprocessing_worker"]
    assert not job_processes(report)[child]["alive_at_end"]
    # run waited for the child, not for the whole grace period
    assert time.monotonic() - started < 30


def test_an_unreaped_child_is_a_zombie_holding_no_memory(gpuleak_run):
    status, report, truth, text = gpuleak_run("child_after_return.py", "zombie", "TRUTH", "3")
    assert_program_succeeded(status, text)
    [child] = truth["multiprocessing_worker"]
    [finding] = findings(report, "zombie")
    assert finding["pids"] == [child]
    assert finding["seconds"] >= 2.0
    assert finding["bytes_total"] == 0
    assert "holding no GPU memory" in finding["summary"]


def test_a_helper_that_only_initialized_cuda_gets_one_line_and_no_section(gpuleak_run, tmp_path):
    page = tmp_path / "report.html"
    status, report, truth, text = gpuleak_run("helper_without_gpu_work.py", "TRUTH", html=page)
    assert_program_succeeded(status, text)
    [helper] = truth["subprocess"]
    process = job_processes(report)[helper]
    assert process["role"] == "subprocess" and process["cuda_initialized"]
    assert not process["gpu_work"]
    assert "initialized CUDA, no GPU memory" in text
    assert "gpuleak: process %d (" % helper not in text
    assert "gpuleak: process %d (" % truth["main"] in text
    assert report["job"]["findings"] == []
    # The HTML page: the job's table has the helper's line; only the main program has a section.
    html = page.read_text()
    assert "Processes of the job" in html and "initialized CUDA, no GPU memory" in html
    helper_index = [i for i, p in enumerate(report["processes"]) if p["pid"] == helper][0]
    main_index = [i for i, p in enumerate(report["processes"]) if p["pid"] == truth["main"]][0]
    assert 'id="process-%d"' % helper_index not in html
    assert 'id="process-%d"' % main_index in html
