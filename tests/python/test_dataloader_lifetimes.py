"""What ends DataLoader workers, checked with a real torch DataLoader (CPU tensors).

docs/processes.md states these facts against common advice; each test runs
real worker processes and looks at /proc for them.
"""
import os
import signal
import subprocess
import textwrap
import time

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from conftest import PYTHON  # noqa: E402


def running(pids):
    """The pids that exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def eventually_none(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running(pids)


def test_a_dataloader_is_not_a_context_manager():
    with pytest.raises(TypeError, match="context manager"):
        with DataLoader(list(range(8))):
            pass


def test_workers_end_with_the_epoch_or_when_the_iterator_is_deleted():
    loader = DataLoader(list(range(64)), batch_size=4, num_workers=2)
    iterator = iter(loader)
    pids = [w.pid for w in iterator._workers]
    assert len(running(pids)) == 2
    list(iterator)
    assert eventually_none(pids) == []

    iterator = iter(loader)
    pids = [w.pid for w in iterator._workers]
    next(iterator)
    del iterator
    assert eventually_none(pids) == []


def test_persistent_workers_outlive_the_epoch_and_a_break_until_the_loader_goes():
    loader = DataLoader(list(range(64)), batch_size=4, num_workers=2, persistent_workers=True)
    for _ in loader:
        pass
    pids = [w.pid for w in loader._iterator._workers]
    for _ in loader:
        break
    time.sleep(0.3)
    assert len(running(pids)) == 2
    del loader
    assert eventually_none(pids) == []


def test_no_workers_without_num_workers():
    loader = DataLoader(list(range(8)), batch_size=4)
    iterator = iter(loader)
    assert not hasattr(iterator, "_workers")


def test_workers_end_by_themselves_soon_after_their_parent_is_killed(tmp_path):
    pids_file = tmp_path / "pids"
    program = textwrap.dedent(
        """
        import sys, time
        from torch.utils.data import DataLoader, Dataset
        class Slow(Dataset):
            def __len__(self): return 10**6
            def __getitem__(self, i):
                time.sleep(0.01)
                return i
        loader = DataLoader(Slow(), batch_size=4, num_workers=2, persistent_workers=True)
        iterator = iter(loader)
        next(iterator)
        open(sys.argv[1], "w").write(" ".join(str(w.pid) for w in iterator._workers))
        time.sleep(120)
    """
    )
    parent = subprocess.Popen([PYTHON, "-c", program, str(pids_file)])
    deadline = time.monotonic() + 60
    while not pids_file.exists() or not pids_file.read_text():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    pids = [int(p) for p in pids_file.read_text().split()]
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    try:
        # torch's workers check that their parent is alive every 5 s.
        assert eventually_none(pids, seconds=15) == []
    finally:
        for pid in running(pids):
            os.kill(pid, signal.SIGKILL)
