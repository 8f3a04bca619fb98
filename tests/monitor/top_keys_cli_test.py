"""`gpuleak top`'s keys in a real terminal: the binary runs in a tmux pane
with the stand-in NVML, keys are sent with send-keys and the screen read
with capture-pane. Sort, filter, tree, selection, ending an orphan after
y, quitting with q, and the terminal's settings as they were before."""
import os
import shlex
import shutil
import subprocess
import tempfile

import pytest

from process_fixtures import (GPULEAK, PYTHON, gpuleak_env, is_running, make_orphan, wait_until,
                              write_nvml_state)

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None,
                                reason="tmux is not installed (scripts/setup --tests installs it)")

MiB = 1 << 20
GiB = 1 << 30

# Holds the stand-in device files; with "fork" also a child that holds them.
HOLDER = ("import os,sys,time\n"
          "held=[open(p,'rb') for p in sys.argv[1:3]]\n"
          "child=0\n"
          "if sys.argv[3]=='fork':\n"
          "    child=os.fork()\n"
          "    if child==0:\n"
          "        parent=os.getppid()\n"
          "        while os.getppid()==parent: time.sleep(0.2)\n"
          "        os._exit(0)\n"
          "print(child,flush=True)\n"
          "parent=os.getppid()\n"
          "while os.getppid()==parent: time.sleep(0.2)\n")


def start_tagged_holder(started, device, tag):
    """(pid, child pid or 0); the tag is in its command line."""
    script = os.path.join(device.directory, "holder.py")
    with open(script, "w") as f:
        f.write(HOLDER)
    process = started.popen([PYTHON, script, device.gpu, device.ctl, tag],
                            stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    if child:
        started.adopt(child)
    return process.pid, child


class Pane:
    """gpuleak top in a tmux pane of its own server; the shell script around
    it records the terminal's settings before and after, and top's status."""

    def __init__(self, env, args):
        self._dir = tempfile.TemporaryDirectory(prefix="gpuleak-top-tmux-")
        self.dir = self._dir.name
        self.socket = os.path.join(self.dir, "tmux.sock")
        script = os.path.join(self.dir, "pane.sh")
        with open(script, "w") as f:
            for name in ("GPULEAK_DEVICE_FILE_GLOB", "GPULEAK_NVML_LIBRARY",
                         "GPULEAK_STAND_IN_NVML_STATE"):
                if name in env:
                    f.write(f"export {name}={shlex.quote(env[name])}\n")
            f.write(f"stty -g > {self.dir}/before.txt\n")
            f.write(shlex.join([GPULEAK, "top", *args]) + "\n")
            f.write(f"echo $? > {self.dir}/status.txt\n")
            f.write(f"stty -g > {self.dir}/after.txt\n")
            f.write("echo TOP-ENDED\nexec sleep 600\n")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "40",
                  "sh " + shlex.quote(script))

    def tmux(self, *args):
        return subprocess.run([TMUX, "-S", self.socket, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=30, check=True).stdout

    def keys(self, *keys):
        self.tmux("send-keys", *keys)

    def screen(self):
        return self.tmux("capture-pane", "-p")

    def wait_for(self, condition):
        seen = {}

        def check():
            seen["screen"] = self.screen()
            return condition(seen["screen"])
        assert wait_until(check), "not on the screen:\n" + seen.get("screen", "")
        return seen["screen"]

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def close(self):
        subprocess.run([TMUX, "-S", self.socket, "kill-server"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
        self._dir.cleanup()


@pytest.fixture
def pane_factory():
    panes = []

    def make(env, args):
        panes.append(Pane(env, args))
        return panes[-1]
    yield make
    for pane in panes:
        pane.close()


def rows(screen):
    """[(pid, selected, line)] of the process table, top to bottom."""
    out = []
    lines = screen.splitlines()
    header = next((i for i, line in enumerate(lines) if "PID USER" in line), len(lines))
    for line in lines[header + 1:]:
        head = line[:8]
        selected = head.startswith(">")
        text = head.lstrip(">").strip()
        if text.isdigit():
            out.append((int(text), selected, line))
    return out


def pids(screen):
    return [pid for pid, _, _ in rows(screen)]


def test_keys_sort_filter_tree_select_and_q_restores_the_terminal(device, started, pane_factory):
    alpha, _ = start_tagged_holder(started, device, "alpha")
    beta, _ = start_tagged_holder(started, device, "beta")
    parent, child = start_tagged_holder(started, device, "fork")
    state = write_nvml_state(device, [
        f"device GPU-2222-stand-in {80 * GiB} {6 * GiB} {512 * MiB} Stand-in H100",
        f"process 0 {alpha} {4 * GiB}",
        f"process 0 {beta} {GiB} {64 * MiB}",
    ])
    pane = pane_factory(gpuleak_env(device, state), ["--interval", "0.2"])
    shown = {alpha, beta, parent, child}
    screen = pane.wait_for(lambda s: shown <= set(pids(s)) and "q quit" in s)
    assert "sort: memory" in screen
    order = pids(screen)
    assert order.index(alpha) < order.index(beta)  # most GPU memory first
    assert rows(screen)[0][1], "the first row starts selected:\n" + screen

    pane.keys("s")  # trend: the growing one first, once it has a trend
    screen = pane.wait_for(lambda s: "sort: trend" in s and pids(s)[:1] == [beta])

    pane.keys("s")
    screen = pane.wait_for(lambda s: "sort: pid" in s)
    assert pids(screen) == sorted(pids(screen))

    pane.keys("/", "b", "e", "t", "a")
    pane.wait_for(lambda s: "filter: beta_" in s)
    pane.keys("Enter")
    screen = pane.wait_for(lambda s: 'filter "beta"' in s)
    assert pids(screen) == [beta]
    pane.keys("f", "Escape")
    screen = pane.wait_for(lambda s: "/ filter  t tree" in s and alpha in pids(s))

    pane.keys("t")
    screen = pane.wait_for(lambda s: "t tree: on" in s)
    order = pids(screen)
    assert order.index(child) == order.index(parent) + 1
    child_line = next(line for pid, _, line in rows(screen) if pid == child)
    assert "`- " in child_line

    def selected(s):
        return [pid for pid, sel, _ in rows(s) if sel]
    order = pids(screen)
    was = selected(screen)
    assert len(was) == 1  # the selection stays on its process across keys
    below = order[order.index(was[0]) + 1] if was[0] != order[-1] else order[-2]
    pane.keys("Down" if was[0] != order[-1] else "Up")
    pane.wait_for(lambda s: selected(s) == [below])
    pane.keys("Up" if was[0] != order[-1] else "Down")
    pane.wait_for(lambda s: selected(s) == was)

    pane.keys("k")  # not an orphan: nothing is asked, nothing is ended
    pane.wait_for(lambda s: f"PID {was[0]} is not an orphan" in s)
    assert is_running(was[0])

    pane.keys("q")
    pane.wait_for(lambda s: "TOP-ENDED" in s)
    assert pane.read("status.txt").strip() == "0"
    assert pane.read("after.txt") == pane.read("before.txt")
    assert "q quit" not in pane.screen()  # the shell's screen is back


def test_k_ends_a_selected_orphan_only_after_y(device, started, pane_factory):
    orphan = make_orphan(started, device)
    pane = pane_factory(gpuleak_env(device), ["--interval", "0.2"])
    pane.wait_for(lambda s: orphan in pids(s) and "q quit" in s)
    pane.keys("/", *"orphan_maker", "Enter")
    screen = pane.wait_for(lambda s: 'filter "orphan_maker"' in s and pids(s) == [orphan])
    assert "ORPHAN" in screen
    pane.keys("k")
    pane.wait_for(lambda s: f"End orphan PID {orphan}" in s and "y/n" in s)
    pane.keys("n")
    pane.wait_for(lambda s: f"PID {orphan} not ended" in s)
    assert is_running(orphan)
    pane.keys("k")
    pane.wait_for(lambda s: f"End orphan PID {orphan}" in s)
    pane.keys("y")
    assert wait_until(lambda: not is_running(orphan))
    pane.keys("q")
    pane.wait_for(lambda s: "TOP-ENDED" in s)
    assert pane.read("after.txt") == pane.read("before.txt")
