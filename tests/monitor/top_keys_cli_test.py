"""`gpuleak top`'s keys in a real terminal: the binary runs in a tmux pane
with the stand-in NVML, keys are sent with send-keys and the screen read
with capture-pane. Sort, filter, tree, selection, attaching to the selected
process (and SIGTERM to top meanwhile detaching it), ending an orphan
after y, quitting with q, and the terminal's settings as they were before."""
import os
import signal
import subprocess

import pytest

from process_fixtures import GPULEAK, PYTHON, gpuleak_env, is_running, make_orphan, wait_until, write_nvml_state
from tmux_pane import NO_TMUX, TMUX, pids, rows

pytestmark = pytest.mark.skipif(TMUX is None, reason=NO_TMUX)

# gpuleak attach's test programs: a training loop started without gpuleak.
ATTACH_PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "attach", "programs")

MiB = 1 << 20
GiB = 1 << 30

# Holds the stand-in device files; with "fork" also a child that holds them.
HOLDER = (
    "import os,sys,time\n"
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
    "while os.getppid()==parent: time.sleep(0.2)\n"
)


def start_tagged_holder(started, device, tag):
    """(pid, child pid or 0); the tag is in its command line."""
    script = os.path.join(device.directory, "holder.py")
    with open(script, "w") as f:
        f.write(HOLDER)
    process = started.popen([PYTHON, script, device.gpu, device.ctl, tag], stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    if child:
        started.adopt(child)
    return process.pid, child


def test_keys_sort_filter_tree_select_and_q_restores_the_terminal(device, started, pane_factory):
    alpha, _ = start_tagged_holder(started, device, "alpha")
    beta, _ = start_tagged_holder(started, device, "beta")
    parent, child = start_tagged_holder(started, device, "fork")
    state = write_nvml_state(
        device,
        [
            f"device GPU-2222-stand-in {80 * GiB} {6 * GiB} {512 * MiB} Stand-in H100",
            f"process 0 {alpha} {4 * GiB}",
            f"process 0 {beta} {GiB} {64 * MiB}",
        ],
    )
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


def attach_refusal():
    """Why `gpuleak attach` cannot run here, or None."""
    if not os.path.exists(os.path.join(os.path.dirname(GPULEAK), "libgpuleak_collector.so")):
        return "no collector beside gpuleak (build gpuleak_collector)"
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        return PYTHON + " has no torch (scripts/setup --tests installs python3-torch)"
    return None


def test_a_attaches_to_the_selected_process_and_its_report_stays_in_view(device, started, pane_factory):
    why = attach_refusal()
    if why:
        pytest.skip(why)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK_")}
    env.update(PYTHONPATH=ATTACH_PROGRAMS, PYTHONDONTWRITEBYTECODE="1")
    loop = [PYTHON, os.path.join(ATTACH_PROGRAMS, "training_loop.py"), "2500", "1", "5"]
    # The same loop without gpuleak, alongside: what the joined one must print.
    alone = started.popen(loop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    program = started.popen(loop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert program.stdout.readline() == "ready\n"
    pane = pane_factory(gpuleak_env(device), ["--interval", "0.2", "--pid", str(program.pid), "--attach-duration", "3"])
    pane.wait_for(lambda s: program.pid in pids(s) and "q quit" in s)
    pane.keys("/", *"training_loop", "Enter")
    pane.wait_for(lambda s: [(pid, sel) for pid, sel, _ in rows(s)] == [(program.pid, True)])

    pane.keys("a")
    ended = f"gpuleak attach {program.pid} exited with status 0; press a key to return to top"
    screen = pane.wait_for(lambda s: ended in s, history_lines=300, bound_s=150)
    assert f"gpuleak top: running gpuleak attach {program.pid} --duration 3" in screen
    assert "Verdict: LEAK +16.0 KiB/step" in screen, screen
    assert "training_loop.py:26" in screen, screen
    # The report stays in view until a key: top draws nothing over it.
    wait_until(lambda: False, bound_s=1.0)
    assert ended in pane.screen(), pane.screen()
    pane.keys("x")
    screen = pane.wait_for(lambda s: "q quit" in s and ended not in s)
    assert f"gpuleak attach {program.pid} exited with status 0" in screen
    pane.keys("q")
    pane.wait_for(lambda s: "TOP-ENDED" in s)
    assert pane.read("status.txt").strip() == "0"
    assert pane.read("after.txt") == pane.read("before.txt")

    # The program went on and ended as it does without gpuleak.
    out, err = program.communicate(timeout=120)
    alone_out, alone_err = alone.communicate(timeout=120)
    assert (out, err, program.returncode) == (alone_out[len("ready\n") :], alone_err, alone.returncode)
    assert program.returncode == 5 and "gpuleak" not in err


def test_sigterm_to_top_during_a_detaches_the_attach_and_the_program_goes_on(device, started, pane_factory):
    why = attach_refusal()
    if why:
        pytest.skip(why)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK_")}
    env.update(PYTHONPATH=ATTACH_PROGRAMS, PYTHONDONTWRITEBYTECODE="1")
    loop = [PYTHON, os.path.join(ATTACH_PROGRAMS, "training_loop.py"), "2500", "1", "5"]
    alone = started.popen(loop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    program = started.popen(loop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert program.stdout.readline() == "ready\n"
    pane = pane_factory(
        gpuleak_env(device), ["--interval", "0.2", "--pid", str(program.pid), "--attach-duration", "600"]
    )
    pane.wait_for(lambda s: program.pid in pids(s) and "q quit" in s)
    pane.keys("/", *"training_loop", "Enter")
    pane.wait_for(lambda s: [(pid, sel) for pid, sel, _ in rows(s)] == [(program.pid, True)])
    pane.keys("a")
    pane.wait_for(lambda s: f"gpuleak: attached to PID {program.pid}" in s, history_lines=300, bound_s=120)
    top = pane.top_pid()
    os.kill(top, signal.SIGTERM)
    # top ends at once with SIGTERM's status, the terminal as it was; the
    # attach it ran was told too: it detaches and reports, well before its 600 s.
    pane.wait_for(lambda s: "TOP-ENDED" in s, history_lines=300)
    assert pane.read("status.txt").strip() == str(128 + signal.SIGTERM)
    assert pane.read("after.txt") == pane.read("before.txt")
    screen = pane.wait_for(lambda s: f"gpuleak: detached from PID {program.pid}" in s, history_lines=300, bound_s=120)
    assert "Verdict: " in screen and "until it detached; the process kept running" in screen
    assert "gpuleak" not in open(f"/proc/{program.pid}/cmdline").read()
    assert "TracerPid:\t0\n" in open(f"/proc/{program.pid}/status").read()
    out, err = program.communicate(timeout=120)
    alone_out, alone_err = alone.communicate(timeout=120)
    assert (out, err, program.returncode) == (alone_out[len("ready\n") :], alone_err, alone.returncode)
