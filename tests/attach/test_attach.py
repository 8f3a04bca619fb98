"""`gpuleak attach PID` end to end, on the CPU: real Python programs started without gpuleak
(programs/training_loop.py, whose stand-in GPU tensors go through the allocator hook's entry
points once the agent has loaded the collector), joined by the real gpuleak binary with its own
ptrace injector. Each test checks what the user sees (verdict, site, holder, keeping line, the
refusal's one line) and that the program went on and ended with exactly the output and exit
status it has without gpuleak."""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
BUILD = os.environ.get("GPULEAK_BUILD_DIR") or os.path.join(HERE, "..", "..", "build")
GPULEAK = os.path.join(BUILD, "gpuleak")
PYTHON = "/usr/bin/python3"  # Debian's, with its CPU torch
PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17

# The loop's own line that keeps a tensor (programs/training_loop.py).
KEEPING_LINE = "training_loop.py:26  history.append(gpu_tensor(1 << 12))"


def ptrace_refusal():
    """Why this machine does not let a process trace another of its user, or None."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(PTRACE_SEIZE, child.pid, None, None) != 0:
            return "ptrace is not allowed here (%s)" % os.strerror(ctypes.get_errno())
        libc.ptrace(PTRACE_DETACH, child.pid, None, None)
        return None
    finally:
        child.kill()
        child.wait()


@pytest.fixture(scope="session", autouse=True)
def machine_allows_ptrace():
    if not (os.path.exists(GPULEAK) and os.path.exists(os.path.join(BUILD, "libgpuleak_collector.so"))):
        pytest.skip("no gpuleak and collector in %s (GPULEAK_BUILD_DIR)" % BUILD)
    try:
        import torch  # noqa: F401  (the programs' stand-in tensors)
    except ImportError:
        if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
            pytest.skip("%s has no torch (scripts/setup --tests installs python3-torch)" % PYTHON)
    why = ptrace_refusal()
    if why:
        pytest.skip(why + ": gpuleak attach cannot be tested on this machine")


class Program:
    """A training loop started without gpuleak; it prints `ready` once its loop runs."""

    def __init__(self, steps, keep_every, exit_status=5, extra=None, prefix=()):
        self.args = [
            *prefix,
            PYTHON,
            os.path.join(PROGRAMS, extra or "training_loop.py"),
            str(steps),
            str(keep_every),
            str(exit_status),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK_")}
        env["PYTHONPATH"] = PROGRAMS
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env = env
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=PROGRAMS
        )
        first = self.process.stdout.readline()
        assert first == "ready\n", (first, self.process.stderr.read())
        self.pid = self.process.pid

    def finish(self, timeout=120):
        out, err = self.process.communicate(timeout=timeout)
        return "ready\n" + out, err, self.process.returncode

    def expected(self):
        """The output and status of the same program run without gpuleak."""
        done = subprocess.run(self.args, capture_output=True, text=True, env=self.env, cwd=PROGRAMS, timeout=300)
        return done.stdout, done.stderr, done.returncode

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()


@pytest.fixture
def programs():
    started = []

    def start(*args, **kwargs):
        program = Program(*args, **kwargs)
        started.append(program)
        return program

    yield start
    for program in started:
        program.kill()


def attach(pid, *args, timeout=180):
    return subprocess.run(
        [GPULEAK, "attach", str(pid)] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout
    )


def test_attach_to_a_leaking_loop_names_the_site_holder_and_keeping_line_and_the_program_ends_as_without_it(
    programs, tmp_path
):
    program = programs(900, 1)
    done = attach(program.pid, "--duration", 5, "-o", tmp_path / "traces", "--json-report", tmp_path / "report.json")
    assert done.returncode == 0, done.stderr
    assert "Verdict: LEAK +16.0 KiB/step" in done.stdout, done.stdout
    assert "Held by: list `history` (module __main__)" in done.stdout, done.stdout
    assert "Kept at: " + KEEPING_LINE in done.stdout, done.stdout
    assert "training_loop.py:26" in done.stdout
    assert "until it detached; the process kept running" in done.stdout
    assert "gpuleak: detached from PID %d" % program.pid in done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    [process] = report["processes"]
    assert process["pid"] == program.pid
    assert process["attach"]["detached"] is True
    assert process["attach"]["end_reason"] == "duration"
    assert process["exited"] is False
    # Nothing of gpuleak is left in the program's output, and it ends as it would have.
    assert program.finish() == program.expected()


def test_attach_to_a_loop_that_frees_what_it_allocates_says_no_leak(programs, tmp_path):
    program = programs(700, 0, exit_status=0)
    done = attach(program.pid, "--duration", 4, "-o", tmp_path / "traces")
    assert done.returncode == 0, done.stderr
    assert "Verdict: NO LEAK" in done.stdout, done.stdout
    assert program.finish() == program.expected()


def test_a_leak_on_every_other_step_is_found_with_its_site(programs, tmp_path):
    program = programs(900, 2)
    done = attach(program.pid, "--duration", 5, "-o", tmp_path / "traces")
    assert done.returncode == 0, done.stderr
    assert "Verdict: LEAK +8.00 KiB/step" in done.stdout, done.stdout
    assert "training_loop.py:26" in done.stdout
    assert program.finish() == program.expected()


def test_steps_bound_the_recording(programs, tmp_path):
    program = programs(1200, 1)
    started = time.monotonic()
    done = attach(program.pid, "--steps", 60, "-o", tmp_path / "traces", "--json-report", tmp_path / "report.json")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    [process] = json.loads((tmp_path / "report.json").read_text())["processes"]
    assert process["attach"]["end_reason"] == "steps"
    assert 60 <= process["attach"]["steps"] < 120, process["attach"]
    assert "Verdict: LEAK" in done.stdout, done.stdout
    assert program.finish() == program.expected()


def test_a_program_that_ends_during_the_attach_is_reported_and_ends_normally(programs, tmp_path):
    program = programs(300, 1)
    done = attach(program.pid, "--duration", 120, "-o", tmp_path / "traces")
    assert done.returncode == 0, done.stderr
    assert "gpuleak: PID %d ended during the attach" % program.pid in done.stderr
    assert "Verdict: LEAK" in done.stdout, done.stdout
    assert program.finish() == program.expected()


def start_attach(pid, tmp_path, *args):
    return subprocess.Popen(
        [GPULEAK, "attach", str(pid), "-o", str(tmp_path / "traces")] + [str(a) for a in args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_attached(attaching, tmp_path):
    deadline = time.monotonic() + 60
    while not (tmp_path / "traces" / ".attach" / "started.json").exists():
        assert attaching.poll() is None, attaching.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_ctrl_c_detaches_cleanly_and_reports(programs, tmp_path):
    program = programs(1200, 1)
    attaching = start_attach(program.pid, tmp_path, "--duration", 120)
    wait_until_attached(attaching, tmp_path)
    time.sleep(3)
    attaching.send_signal(signal.SIGINT)
    out, err = attaching.communicate(timeout=60)
    assert attaching.returncode == 0, err
    assert "gpuleak: detached from PID %d" % program.pid in err
    report = subprocess.run([GPULEAK, "report", "--json", str(tmp_path / "traces")], capture_output=True, text=True)
    [process] = json.loads(report.stdout)["processes"]
    assert process["attach"]["end_reason"] == "asked"
    assert program.finish() == program.expected()


def test_gpuleak_killed_mid_attach_leaves_the_program_running_and_its_trace_closed(programs, tmp_path):
    program = programs(1000, 1)
    attaching = start_attach(program.pid, tmp_path, "--duration", 120)
    wait_until_attached(attaching, tmp_path)
    time.sleep(1)
    attaching.kill()
    attaching.communicate()
    # The agent sees gpuleak gone and closes the trace by itself.
    stopped = tmp_path / "traces" / ".attach" / "stopped.json"
    deadline = time.monotonic() + 30
    while not stopped.exists():
        assert time.monotonic() < deadline, "the agent did not stop after gpuleak was killed"
        time.sleep(0.05)
    assert json.loads(stopped.read_text())["reason"] == "gpuleak attach ended"
    assert program.process.poll() is None, "the program ended with gpuleak"
    assert program.finish() == program.expected()


def test_dry_run_says_what_it_would_do_and_touches_nothing(programs, tmp_path):
    program = programs(600, 0, exit_status=0)
    done = attach(program.pid, "--dry-run", "-o", tmp_path / "traces")
    assert done.returncode == 0, done.stderr
    assert "nothing was done" in done.stdout
    assert "Py_AddPendingCall at 0x" in done.stdout
    assert "stop the main thread of PID %d" % program.pid in done.stdout
    assert not (tmp_path / "traces").exists()
    assert program.finish() == program.expected()


# ---- refusals: one line, exit status 3, the process untouched ----------------------------


def refused(done, *words):
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuleak: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_no_such_process_is_refused():
    refused(attach(4194304 - 7), "cannot attach: no process")


def test_a_process_that_is_not_python_is_refused():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        refused(attach(sleeper.pid), "is not a Python process")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_traced_by_another_tracer_is_refused_with_the_tracer(programs):
    program = programs(400, 0, exit_status=0)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.ptrace(PTRACE_SEIZE, program.pid, None, None) == 0
    try:
        refused(attach(program.pid), "already traced by PID %d" % os.getpid())
    finally:
        libc.ptrace(PTRACE_DETACH, program.pid, None, None)
    assert program.finish() == program.expected()


def test_a_stopped_process_is_refused(programs):
    program = programs(400, 0, exit_status=0)
    os.kill(program.pid, signal.SIGSTOP)
    try:
        time.sleep(0.1)
        refused(attach(program.pid), "is stopped", "kill -CONT")
    finally:
        os.kill(program.pid, signal.SIGCONT)
    assert program.finish() == program.expected()


def without_ptrace_capability(command):
    """The command with CAP_SYS_PTRACE dropped (root keeps its uid), or None without setpriv."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    return ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"] + command


def test_an_undumpable_process_is_refused_when_the_kernel_says_no(programs):
    program = programs(600, 0, exit_status=0, extra="undumpable_loop.py")
    command = [GPULEAK, "attach", str(program.pid)]
    if os.geteuid() != 0:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    else:
        command = without_ptrace_capability(command)
        if command is None:
            pytest.skip("needs setpriv to drop CAP_SYS_PTRACE")
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    line = refused(done)
    assert "PR_SET_DUMPABLE" in line or "not permitted" in line, line
    assert program.finish() == program.expected()


def test_another_users_process_is_refused():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run two processes as two other users")
    other = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"])
    try:
        time.sleep(0.2)
        done = subprocess.run(
            ["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", GPULEAK, "attach", str(other.pid)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        refused(done, "belongs to another user (uid 65534)")
    finally:
        other.kill()
        other.wait()


def test_a_program_blocked_in_c_code_is_left_alone_after_the_start_timeout(programs, tmp_path):
    # time.sleep() runs no bytecode: the boot cannot run until it returns.
    program = programs(6, 0, exit_status=0, extra="sleeps_in_c.py")
    done = attach(program.pid, "--start-timeout", 1, "-o", tmp_path / "traces")
    refused(done, "did not run gpuleak's boot within 1 s")
    out, err, status = program.finish()
    assert (out, status) == ("ready\ndone\n", 0), (out, err)
    assert "gpuleak" not in err
    assert not list((tmp_path / "traces").glob("*.trace"))


# A user namespace of its own, whose root is uid 65533 outside: what root is
# in a rootless container (podman, docker --userns-remap, Kubernetes user
# namespaces).
ROOTLESS_UID = 65533


def rootless_container_refusal():
    """Why this machine cannot make a user namespace for an unprivileged user, or None."""
    if os.geteuid() != 0 or not (shutil.which("setpriv") and shutil.which("unshare")):
        return "needs root, setpriv and unshare to make a rootless container's user namespace"
    probe = subprocess.run(as_rootless_container_root(["true"]), capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return "unshare -U is not allowed here: " + probe.stderr.strip()
    return None


def as_rootless_container_root(command):
    return [
        "setpriv",
        "--reuid=%d" % ROOTLESS_UID,
        "--regid=%d" % ROOTLESS_UID,
        "--clear-groups",
        "unshare",
        "--user",
        "--map-root-user",
    ] + command


def test_from_a_rootless_container_a_process_outside_it_is_refused_with_the_reason(programs):
    why = rootless_container_refusal()
    if why:
        pytest.skip(why)
    program = programs(600, 0, exit_status=0)
    done = subprocess.run(
        as_rootless_container_root([GPULEAK, "attach", str(program.pid)]), capture_output=True, text=True, timeout=60
    )
    line = refused(
        done,
        "PID %d" % program.pid,
        "user namespace of its own",
        "it is uid %d outside" % ROOTLESS_UID,
        "inside its container",
    )
    assert "Traceback" not in done.stderr and "not permitted" not in line
    assert program.finish() == program.expected()


def test_a_process_in_its_own_user_namespace_is_refused_from_another_one(programs):
    why = rootless_container_refusal()
    if why:
        pytest.skip(why)
    # The program runs in a user namespace of its own (unshare -U, as a
    # container's process), gpuleak in another one: neither is inside the other.
    program = programs(600, 0, exit_status=0, prefix=("unshare", "--user"))
    assert os.readlink("/proc/%d/ns/user" % program.pid) != os.readlink("/proc/self/ns/user")
    done = subprocess.run(
        as_rootless_container_root([GPULEAK, "attach", str(program.pid)]), capture_output=True, text=True, timeout=60
    )
    refused(done, "PID %d" % program.pid, "user namespace of its own", "inside its container")
    assert program.finish() == program.expected()


def test_a_process_in_a_user_namespace_below_gpuleaks_is_joined_as_usual(programs, tmp_path):
    # What root sees of a container it started: its user namespace is below
    # root's, where root keeps its rights; the refusal above must not catch it.
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare to start a process in a user namespace below ours")
    program = programs(900, 1, prefix=("unshare", "--user"))
    assert os.readlink("/proc/%d/ns/user" % program.pid) != os.readlink("/proc/self/ns/user")
    done = attach(program.pid, "--duration", 4, "-o", tmp_path / "traces")
    assert done.returncode == 0, done.stderr
    assert "Verdict: LEAK +16.0 KiB/step" in done.stdout, done.stdout
    assert program.finish() == program.expected()
