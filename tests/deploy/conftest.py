"""Deploy tests reuse the monitor tests' process fixtures (stand-in device,
started processes) and their exporter helper."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "monitor"))

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
