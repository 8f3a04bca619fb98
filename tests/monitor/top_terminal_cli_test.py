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
        return subprocess.run(["stty", "-g"], stdin=terminal, stdout=subprocess.PIPE, text=True,
                              timeout=30, check=True).stdout


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGHUP, signal.SIGSEGV,
                                           signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                                           signal.SIGABRT], ids=lambda s: signal.Signals(s).name)
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
