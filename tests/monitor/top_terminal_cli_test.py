"""`gpuleak top` on a real terminal (a tmux pane) dying by a signal: a crash
(SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) or kill and a closed window
(SIGTERM, SIGHUP). The terminal's settings (`stty -g`) must be as they were
before top started, the shell's screen back, and the shell must see the
signal (status 128 + its number)."""
import os
import signal
import subprocess

import pytest

from process_fixtures import gpuleak_env, is_running, wait_until
from tmux_pane import NO_TMUX, TMUX

pytestmark = pytest.mark.skipif(TMUX is None, reason=NO_TMUX)


def terminal_settings(pane):
    """`stty -g` of the pane's terminal now, read from outside."""
    tty = pane.tmux("display-message", "-p", "#{pane_tty}").strip()
    with open(tty) as terminal:
        return subprocess.run(
            ["stty", "-g"], stdin=terminal, stdout=subprocess.PIPE, text=True, timeout=30, check=True
        ).stdout


@pytest.mark.parametrize(
    "signal_number",
    [signal.SIGTERM, signal.SIGHUP, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT],
    ids=lambda s: signal.Signals(s).name,
)
def test_the_terminal_is_restored_when_top_dies_by(signal_number, device, pane_factory):
    pane = pane_factory(gpuleak_env(device), ["--interval", "0.2"])
    pane.wait_for(lambda s: "q quit" in s)
    assert terminal_settings(pane) != pane.read("before.txt"), "top did not take the terminal"
    top = pane.top_pid()
    os.kill(top, signal_number)
    pane.wait_for(lambda s: "TOP-ENDED" in s)
    assert wait_until(lambda: not is_running(top))
    assert pane.read("status.txt").strip() == str(128 + signal_number)
    assert pane.read("after.txt") == pane.read("before.txt")
    assert "q quit" not in pane.screen()  # the shell's screen is back


def test_a_terminal_that_takes_no_output_does_not_keep_top_from_dying(device, pane_factory):
    pane = pane_factory(gpuleak_env(device), ["--interval", "0.05"])
    pane.wait_for(lambda s: "q quit" in s)
    top = pane.top_pid()
    server = int(pane.tmux("display-message", "-p", "#{pid}").strip())
    os.kill(server, signal.SIGSTOP)  # nothing reads the terminal's output any more
    try:

        def blocked_in_write():
            with open(f"/proc/{top}/syscall") as f:
                return f.read().split()[0] == "1"  # write(2), waiting for room

        assert wait_until(blocked_in_write), "top never filled the terminal's buffer"
        os.kill(top, signal.SIGTERM)
        # The restore cannot finish (its drain waits for the stopped reader):
        # its 2 s watchdog ends top instead of leaving it hung.
        assert wait_until(lambda: not is_running(top), bound_s=10)
    finally:
        os.kill(server, signal.SIGCONT)
    pane.wait_for(lambda s: "TOP-ENDED" in s)
    assert pane.read("status.txt").strip() == str(128 + signal.SIGALRM)  # the watchdog's
