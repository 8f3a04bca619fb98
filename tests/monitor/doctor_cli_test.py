"""`gpuleak doctor` against real processes: a training job with spawned
workers and an unreaped zombie, a real orphan, healthy holders; with and
without a (stand-in) driver; --kill-orphans with its refusals."""
import json
import os
import subprocess

import pytest

from process_fixtures import (
    GPULEAK,
    PYTHON,
    as_user,
    gpuleak_env,
    gpuleak_runs_as,
    is_running,
    make_orphan,
    proc_stat,
    run_gpuleak,
    start_holder,
    start_training_job,
    wait_until,
    write_nvml_state,
)

NOBODY = 65534
# doctor's status when the driver could not be asked about GPU memory (no
# --no-nvml): the diagnosis is partial, and a script must not read it as clean.
NO_DRIVER = 4
MiB = 1 << 20
GiB = 1 << 30


def kill_flags(device, args):
    """--kill-orphans takes the stand-in device files only from the flag: the
    environment variable never widens what it may end."""
    return [*args, "--device-files", device.glob] if "--kill-orphans" in args else list(args)


def doctor_json(device, args=(), nvml_state=None, **kwargs):
    result = run_gpuleak(["doctor", "--json", *kill_flags(device, args)], gpuleak_env(device, nvml_state), **kwargs)
    assert result.returncode in (0, 1, 2, NO_DRIVER), result.stderr
    return result, json.loads(result.stdout)


def by_pid(items):
    return {item["pid"]: item for item in items if item.get("pid") is not None}


def test_doctor_classifies_orphan_zombie_and_workers(device, started):
    job = start_training_job(started, device)
    orphan = make_orphan(started, device)
    healthy = start_holder(started, device)
    result, report = doctor_json(device)
    assert result.returncode == NO_DRIVER, result.stderr
    assert report["gpu_memory_examined"] is False
    processes = by_pid(report["processes"])
    findings = by_pid(report["findings"])

    assert processes[orphan]["verdict"] == "orphan"
    assert processes[orphan]["orphan"] is True
    assert findings[orphan]["kind"] == "orphan"
    assert findings[orphan]["severity"] == "action"
    assert findings[orphan]["can_kill"] is True
    for key in ("evidence", "cause", "action"):
        assert findings[orphan][key], key

    zombie = job["zombie"]
    assert processes[zombie]["verdict"] == "zombie"
    assert processes[zombie]["state"] == "Z"
    assert findings[zombie]["kind"] == "zombie"
    assert str(job["training"]) in findings[zombie]["action"]

    for worker in job["dataloader_workers"]:
        assert processes[worker]["relation"] == {
            "kind": "dataloader_worker",
            "of_pid": job["training"],
            "text": f"DataLoader worker of PID {job['training']}",
        }
        assert findings[worker]["kind"] == "worker_context"
        assert processes[worker]["device_handles"] == 1
    mp_worker = job["multiprocessing_worker"]
    assert processes[mp_worker]["relation"]["kind"] == "multiprocessing_worker"
    assert findings[mp_worker]["kind"] == "worker_context"

    assert processes[job["training"]]["verdict"] == "ok"
    assert job["training"] not in findings
    assert processes[healthy]["verdict"] in ("ok", "worker")
    assert findings.get(healthy, {"severity": "info"})["severity"] == "info"
    assert report["nvml"]["available"] is False
    assert "libnvidia-ml" in report["nvml"]["message"]


def test_doctor_text_gives_evidence_cause_and_action(device, started):
    job = start_training_job(started, device)
    orphan = make_orphan(started, device)
    result = run_gpuleak(["doctor"], gpuleak_env(device))
    assert result.returncode == NO_DRIVER, result.stderr
    text = result.stdout
    assert f"PID {orphan} is an orphan" in text
    assert f"PID {job['zombie']} is a zombie" in text
    assert f"DataLoader worker of PID {job['training']}" in text
    assert "Evidence:" in text and "Cause:" in text and "What to do:" in text
    assert "NVML is not available" in text
    assert "GPU memory was not examined" in text
    assert "No problems found" not in text
    assert "\x1b" not in text


def test_fail_on_problems_sets_the_exit_status(device, started):
    make_orphan(started, device)
    result = run_gpuleak(["doctor", "--fail-on-problems"], gpuleak_env(device))
    assert result.returncode == 1, result.stderr


def test_doctor_names_the_memory_each_holds_with_a_driver(device, started):
    job = start_training_job(started, device)
    orphan = make_orphan(started, device)
    absent = int(open("/proc/sys/kernel/pid_max").read()) + 1
    workers = job["dataloader_workers"]
    state = write_nvml_state(
        device,
        [
            f"device GPU-0000-stand-in {80 * GiB} {(2 * 1024 + 2 * 500 + 12 * 1024 + 3 * 1024 + 4096) * MiB} {512 * MiB} Stand-in H200",
            f"process 0 {job['training']} {2 * GiB}",
            f"process 0 {workers[0]} {500 * MiB}",
            f"process 0 {workers[1]} {500 * MiB}",
            f"process 0 {orphan} {12 * GiB}",
            f"process 0 {absent} {3 * GiB}",
        ],
    )
    result, report = doctor_json(device, nvml_state=state)
    assert result.returncode == 0, result.stderr
    assert report["nvml"]["available"] is True
    assert report["gpu_memory_examined"] is True
    findings = by_pid(report["findings"])
    assert findings[orphan]["memory_bytes"] == 12 * GiB
    assert "12.0 GiB" in findings[orphan]["summary"]
    for worker in workers:
        assert findings[worker]["kind"] == "worker_context"
        assert findings[worker]["memory_bytes"] == 500 * MiB
        assert "500 MiB" in findings[worker]["summary"]
    assert findings[absent]["kind"] == "other_namespace"
    assert findings[absent]["memory_bytes"] == 3 * GiB
    unaccounted = [f for f in report["findings"] if f["kind"] == "unaccounted_memory"]
    assert len(unaccounted) == 1
    assert unaccounted[0]["memory_bytes"] == 4 * GiB
    device_entry = report["devices"][0]
    assert device_entry["uuid"] == "GPU-0000-stand-in"
    assert device_entry["unaccounted_bytes"] == 4 * GiB


def test_a_driver_that_does_not_start_is_said_and_exits_4(device, started):
    holder = start_holder(started, device)
    state = write_nvml_state(device, ["init_error 9"])
    result, report = doctor_json(device, nvml_state=state)
    assert result.returncode == NO_DRIVER
    assert report["nvml"]["available"] is False
    assert "Driver Not Loaded" in report["nvml"]["message"]
    assert holder in by_pid(report["processes"])


def test_kill_orphans_in_a_pipe_needs_yes(device, started):
    orphan = make_orphan(started, device)
    result = run_gpuleak(kill_flags(device, ["doctor", "--kill-orphans"]), gpuleak_env(device))
    assert result.returncode == 2
    assert "--yes" in result.stderr
    assert is_running(orphan)


def test_kill_orphans_asks_on_a_terminal_and_no_means_no(device, started):
    orphan = make_orphan(started, device)
    controller, terminal = os.openpty()
    os.write(controller, b"n\n")  # typed ahead; the prompt reads it from the terminal
    result = run_gpuleak(kill_flags(device, ["doctor", "--kill-orphans"]), gpuleak_env(device), stdin=terminal)
    os.close(terminal)
    os.close(controller)
    assert result.returncode == NO_DRIVER
    assert "[y/N]" in result.stderr
    assert "not confirmed" in result.stdout
    assert is_running(orphan)


def test_kill_orphans_ends_the_callers_orphan_and_nothing_else(device, started):
    job = start_training_job(started, device)
    orphan = make_orphan(started, device)
    healthy = start_holder(started, device)
    result, report = doctor_json(device, ["--kill-orphans", "--yes", "--grace", "5"])
    assert result.returncode == NO_DRIVER, result.stderr
    kill = report["kill_orphans"]
    assert [c["pid"] for c in kill["candidates"]] == [orphan]
    assert kill["candidates"][0]["allowed"] is True
    assert kill["outcomes"][0]["result"] in ("ended_by_sigterm", "ended_by_sigkill")
    assert any("SIGTERM" in line and str(orphan) in line for line in kill["log"])
    assert f"sending SIGTERM to PID {orphan}" in result.stderr
    assert wait_until(lambda: not is_running(orphan))
    for pid in [job["training"], healthy, job["multiprocessing_worker"]] + job["dataloader_workers"]:
        assert is_running(pid), pid


def test_nothing_to_end_is_said_plainly(device, started):
    start_holder(started, device)
    result = run_gpuleak(kill_flags(device, ["doctor", "--kill-orphans", "--yes"]), gpuleak_env(device))
    assert result.returncode == NO_DRIVER
    assert "no orphaned process holds the GPU" in result.stdout


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to create another user's orphan")
def test_root_ends_another_users_orphan_only_with_all_users(device, started):
    orphan = make_orphan(started, device, as_uid=NOBODY)
    assert proc_stat(orphan)[2] == NOBODY
    result, report = doctor_json(device, ["--kill-orphans", "--yes"])
    assert result.returncode == NO_DRIVER, result.stderr
    candidate = report["kill_orphans"]["candidates"][0]
    assert candidate["pid"] == orphan and candidate["allowed"] is False
    assert "--all-users" in candidate["reason"]
    assert report["kill_orphans"]["outcomes"] == []
    assert is_running(orphan)

    result, report = doctor_json(device, ["--kill-orphans", "--yes", "--all-users", "--grace", "5"])
    assert result.returncode == NO_DRIVER, result.stderr
    assert report["kill_orphans"]["outcomes"][0]["pid"] == orphan
    assert wait_until(lambda: not is_running(orphan))


@pytest.mark.skipif(
    os.getuid() != 0 or not gpuleak_runs_as(NOBODY), reason="needs root and a build directory other users can reach"
)
def test_an_ordinary_user_cannot_end_roots_orphan_nor_use_all_users(device, started):
    orphan = make_orphan(started, device)  # owned by root
    result = run_gpuleak(
        kill_flags(device, ["doctor", "--kill-orphans", "--all-users", "--yes"]),
        gpuleak_env(device),
        preexec_fn=as_user(NOBODY),
    )
    assert result.returncode == 2
    assert "--all-users needs root" in result.stderr
    result = run_gpuleak(
        kill_flags(device, ["doctor", "--json", "--kill-orphans", "--yes"]),
        gpuleak_env(device),
        preexec_fn=as_user(NOBODY),
    )
    report = json.loads(result.stdout)
    # As another user it cannot even see root's open files, so it finds no
    # orphan holding the GPU, says why, and ends nothing.
    assert any("owned by other users" in note for note in report["notes"])
    assert report["kill_orphans"]["outcomes"] == []
    assert is_running(orphan)


def test_usage_errors_exit_2_with_one_clear_line(device):
    for args in (
        ["doctor", "--frobnicate"],
        ["doctor", "--yes"],
        ["doctor", "--all-users"],
        ["doctor", "--kill-orphans", "--grace", "-1"],
    ):
        result = run_gpuleak(args, gpuleak_env(device))
        assert result.returncode == 2, args
        assert result.stderr.startswith("gpuleak: "), result.stderr
        assert "Traceback" not in result.stderr and "terminate" not in result.stderr


# GPULEAK_DEVICE_FILE_GLOB alone made --kill-orphans treat any process
# holding a matching file as a GPU holder, and nothing said a non-default
# glob was in use. Now only the explicit flag changes the kill set.
def test_the_environment_glob_alone_never_widens_what_kill_orphans_may_end(device, started):
    orphan = make_orphan(started, device)  # holds the stand-in files, not /dev/nvidia*
    result = run_gpuleak(["doctor", "--json", "--kill-orphans", "--yes"], gpuleak_env(device))
    assert result.returncode == NO_DRIVER, result.stderr
    report = json.loads(result.stdout)
    assert report["kill_orphans"]["outcomes"] == []
    assert orphan not in [c["pid"] for c in report["kill_orphans"]["candidates"]]
    assert "GPULEAK_DEVICE_FILE_GLOB is not used to choose processes to end" in result.stderr
    assert is_running(orphan)


def test_a_non_default_device_glob_is_always_said(device, started):
    start_holder(started, device)
    for args in (["doctor"], ["doctor", "--device-files", device.glob], ["top", "--count", "1"]):
        env = gpuleak_env(device) if args[-1] != device.glob else dict(gpuleak_env(device), GPULEAK_DEVICE_FILE_GLOB="")
        result = run_gpuleak(args, env)
        assert result.returncode == (NO_DRIVER if args[0] == "doctor" else 0), (args, result.stderr)
        assert f"GPU device files are those matching '{device.glob}'" in result.stderr, args
        assert "not the default /dev/nvidia*" in result.stderr


def start_latin1_holder(started, device):
    """A GPU holder whose last argument is Latin-1 bytes, not UTF-8."""
    code = (
        "import os,sys,time\n"
        "held=[open(p,'rb') for p in sys.argv[1:3]]\n"
        "print('ready',flush=True)\n"
        "parent=os.getppid()\n"
        "while os.getppid()==parent: time.sleep(0.2)\n"
    )
    process = started.popen(
        [PYTHON, "-c", code, device.gpu, device.ctl, b"--name=J\xf6rg"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "ready"
    return process.pid


# A process whose argument is not UTF-8 made `doctor --json` and `top --json`
# fail for everyone (https://github.com/nicolargo/glances/issues/391): the
# JSON carries the bytes, as \udcXX escapes (PEP 383).
def test_doctor_and_top_json_carry_a_latin1_command_line(device, started):
    holder = start_latin1_holder(started, device)
    for args in (["doctor", "--json"], ["top", "--json", "--count", "1", "--pid", str(holder)]):
        result = subprocess.run(
            [GPULEAK, *args], env=gpuleak_env(device), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120
        )
        assert result.returncode == (NO_DRIVER if args[0] == "doctor" else 0), (args, result.stderr)
        report = json.loads(result.stdout.decode("utf-8"))
        entry = by_pid(report["processes"])[holder]
        assert os.fsencode(entry["command"]).endswith(b"--name=J\xf6rg"), entry["command"]


def test_without_the_driver_doctor_never_says_no_problems(device):
    # A host without the NVIDIA driver and nothing holding a GPU file: the
    # old output was "No problems found" and status 0.
    result = run_gpuleak(["doctor"], gpuleak_env(device))
    assert result.returncode == NO_DRIVER, result.stderr
    assert "No problems found" not in result.stdout
    assert "GPU memory was not examined" in result.stdout
    assert "Only /proc was checked" in result.stdout
    # Asked to skip the driver, it still says what was not examined, and exits 0.
    result = run_gpuleak(["doctor", "--no-nvml"], gpuleak_env(device))
    assert result.returncode == 0, result.stderr
    assert "GPU memory was not examined" in result.stdout
    assert "No problems found" not in result.stdout


def test_with_a_driver_and_nothing_wrong_doctor_says_no_problems(device):
    state = write_nvml_state(device, [f"device GPU-5555-stand-in {80 * GiB} 0 0 Stand-in H200"])
    result = run_gpuleak(["doctor"], gpuleak_env(device, state))
    assert result.returncode == 0, result.stderr
    assert "No problems found" in result.stdout


def test_watch_offers_the_attach_command_for_a_process_whose_memory_grows(device, started):
    leaker = start_holder(started, device)
    steady = start_holder(started, device)
    state = write_nvml_state(
        device,
        [
            f"device GPU-3333-stand-in {80 * GiB} {3 * GiB} {512 * MiB} Stand-in H100",
            f"process 0 {leaker} {GiB} {64 * MiB}",
            f"process 0 {steady} {2 * GiB}",
        ],
    )
    result = run_gpuleak(["doctor", "--watch", "2"], gpuleak_env(device, state))
    assert result.returncode == 0, result.stderr
    assert f"PID {leaker}'s GPU memory grows by" in result.stdout
    assert f"`gpuleak attach {leaker}`" in result.stdout
    assert f"gpuleak attach {steady}" not in result.stdout

    _, report = doctor_json(device, ["--watch", "2"], state)
    growing = [f for f in report["findings"] if f["kind"] == "growing_memory"]
    assert [f["pid"] for f in growing] == [leaker]
    assert growing[0]["severity"] == "warning"
    assert f"gpuleak attach {leaker}" in growing[0]["action"]

    # One look has no trend: nothing is called growing.
    _, report = doctor_json(device, [], state)
    assert not [f for f in report["findings"] if f["kind"] == "growing_memory"]
