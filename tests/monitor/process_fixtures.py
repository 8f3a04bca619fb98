"""Real processes and a stand-in GPU for the command-line tests: the built
gpuleak binary runs as a child process against them. Everything started
here is ended by the fixture that started it, and every long-lived helper
also exits by itself once the test process is gone."""
import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
GPULEAK = os.environ.get("GPULEAK_BIN", "")
STAND_IN_NVML = os.environ.get("GPULEAK_STAND_IN_NVML", "")
PYTHON = "/usr/bin/python3"
BOUND_S = 30  # upper bound for waits: against hangs, not a timing assertion


def wait_until(condition, bound_s=BOUND_S, step_s=0.05):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return condition()


def proc_stat(pid):
    """(state, ppid, uid) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        uid = os.stat(f"/proc/{pid}").st_uid
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[1]), uid


def is_running(pid):
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


class StandInDevice:
    """A directory with files named like NVIDIA device nodes."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="gpuleak-cli-dev-")
        os.chmod(self._dir.name, 0o755)
        self.gpu = os.path.join(self._dir.name, "nvidia0")
        self.ctl = os.path.join(self._dir.name, "nvidiactl")
        for path in (self.gpu, self.ctl):
            with open(path, "w") as f:
                f.write("stand-in\n")
            os.chmod(path, 0o644)
        self.glob = os.path.join(self._dir.name, "nvidia*")
        self.directory = self._dir.name

    def close(self):
        self._dir.cleanup()


def gpuleak_env(device, nvml_state=None, **extra):
    env = dict(os.environ)
    env["GPULEAK_DEVICE_FILE_GLOB"] = device.glob
    if nvml_state is None:
        env["GPULEAK_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"
    else:
        env["GPULEAK_NVML_LIBRARY"] = STAND_IN_NVML
        env["GPULEAK_STAND_IN_NVML_STATE"] = nvml_state
    env.update(extra)
    return env


def run_gpuleak(args, env, stdin=subprocess.DEVNULL, preexec_fn=None, timeout=120):
    return subprocess.run(
        [GPULEAK] + args,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


class Started:
    """Processes started by a test, ended when it finishes."""

    def __init__(self):
        self.popens = []
        self.pids = []

    def popen(self, args, **kwargs):
        process = subprocess.Popen(args, **kwargs)
        self.popens.append(process)
        return process

    def adopt(self, pid):
        self.pids.append(pid)

    def close(self):
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for process in self.popens:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()


def start_holder(started, device):
    """A process holding the stand-in device open, like a CUDA process."""
    code = (
        "import os,sys,time\n"
        "held=[open(p,'rb') for p in sys.argv[1:]]\n"
        "print('ready',flush=True)\n"
        "parent=os.getppid()\n"
        "while os.getppid()==parent: time.sleep(0.2)\n"
    )
    process = started.popen([PYTHON, "-c", code, device.gpu, device.ctl], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process.pid


def start_training_job(started, device):
    ready = os.path.join(device.directory, f"job-{len(started.popens)}.json")
    started.popen([PYTHON, os.path.join(FIXTURES, "training_job.py"), device.gpu, ready])
    assert wait_until(lambda: os.path.exists(ready)), "training_job.py did not start"
    with open(ready) as f:
        job = json.load(f)
    started.adopt(job["training"])
    for pid in job["dataloader_workers"] + [job["multiprocessing_worker"]]:
        started.adopt(pid)
    assert wait_until(lambda: (proc_stat(job["zombie"]) or ("?",))[0] == "Z")
    return job


def make_orphan(started, device, as_uid=None):
    args = [PYTHON, os.path.join(FIXTURES, "orphan_maker.py"), str(os.getpid()), device.gpu, device.ctl]
    if as_uid is not None:
        args += ["--as-uid", str(as_uid)]
    maker = subprocess.run(args, stdout=subprocess.PIPE, text=True, timeout=BOUND_S)
    orphan = int(maker.stdout.split()[0])
    started.adopt(orphan)
    # The maker has exited and been reaped: the orphan now has a new parent.
    assert wait_until(lambda: proc_stat(orphan) is not None)
    return orphan


def start_rss_grower(started, step_mib, period_s):
    process = started.popen(
        [PYTHON, os.path.join(FIXTURES, "rss_grower.py"), str(step_mib), str(period_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "ready"
    return process.pid


def write_nvml_state(device, lines):
    path = os.path.join(device.directory, "nvml-state.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def as_user(uid):
    """preexec_fn that drops to uid (only when running as root)."""

    def drop():
        os.setgid(uid)
        os.setuid(uid)

    return drop


def gpuleak_runs_as(uid):
    """True when a process with uid can execute the gpuleak binary."""
    if os.getuid() != 0:
        return False
    try:
        probe = subprocess.run(
            [GPULEAK, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_user(uid)
        )
    except OSError:
        return False  # the build directory is not reachable for that user
    return probe.returncode == 0
