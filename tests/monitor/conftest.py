"""pytest fixtures shared by the monitor command-line tests."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import process_fixtures  # noqa: E402
import tmux_pane  # noqa: E402


@pytest.fixture
def device():
    stand_in = process_fixtures.StandInDevice()
    yield stand_in
    stand_in.close()


@pytest.fixture
def started():
    processes = process_fixtures.Started()
    yield processes
    processes.close()


@pytest.fixture
def pane_factory():
    """Makes `gpuleak top` panes (tmux_pane.Pane); their tmux servers end with the test."""
    panes = []

    def make(env, args, **kwargs):
        panes.append(tmux_pane.Pane(env, args, **kwargs))
        return panes[-1]

    yield make
    for pane in panes:
        pane.close()


def pytest_configure(config):
    if not process_fixtures.GPULEAK or not os.access(process_fixtures.GPULEAK, os.X_OK):
        raise pytest.UsageError("set GPULEAK_BIN to the built gpuleak binary (ctest does)")
