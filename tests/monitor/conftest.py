"""pytest fixtures shared by the monitor command-line tests."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import process_fixtures  # noqa: E402


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


def pytest_configure(config):
    if not process_fixtures.GPULEAK or not os.access(process_fixtures.GPULEAK, os.X_OK):
        raise pytest.UsageError("set GPULEAK_BIN to the built gpuleak binary (ctest does)")
