"""The overhead benchmark's analysis (bench/run_collector_overhead.py): the
split of processes into the GPU machine's two states, the like-for-like
ratios, and --rejudge on a result saved from the H200."""
import json
import os
import shutil
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, BENCH)
import run_collector_overhead as overhead  # noqa: E402


def test_split_finds_the_two_states_despite_a_process_in_between():
    values = [0.61, 0.62, 0.63, 0.65, 0.66, 0.91, 1.09, 1.12, 1.16, 1.18]
    threshold = overhead.split_by_state(values)
    assert threshold is not None and 0.66 < threshold < 1.09


def test_split_refuses_samples_of_one_state():
    assert overhead.split_by_state([1.08, 1.10, 1.11, 1.13, 1.15, 1.17, 1.20]) is None


def test_like_for_like_is_not_fooled_by_different_proportions_of_states():
    # Native: 10 fast processes, 5 slow; the collector: 4 fast, 11 slow; in
    # each state it costs exactly 1.8x. The ratio of medians mixes states.
    native_async = [0.60] * 10 + [1.20] * 5
    mine_async = [1.08] * 4 + [2.16] * 11
    samples = {
        "native": {"async": native_async, "sync": [60.0] * 10 + [85.0] * 5},
        "gpuleak": {"async": mine_async, "sync": [60.6] * 4 + [85.85] * 11},
    }
    by_state = overhead.ratio_by_state(samples, "gpuleak")
    assert by_state["fast"]["async"]["ratio"] == pytest.approx(1.8)
    assert by_state["slow"]["async"]["ratio"] == pytest.approx(1.8)
    assert by_state["fast"]["sync"]["ratio"] == pytest.approx(1.01)
    assert (by_state["fast"]["processes"], by_state["slow"]["native_processes"]) == (4, 5)
    raw = sorted(mine_async)[7] / sorted(native_async)[7]
    assert raw == pytest.approx(3.6)


def test_rejudge_recomputes_the_verdict_of_a_saved_result_and_keeps_its_samples(tmp_path):
    saved = os.path.join(os.path.dirname(__file__), "data", "collector-overhead-0d80813.json")
    copy = tmp_path / "result.json"
    shutil.copy(saved, copy)
    before = json.loads(copy.read_text())
    for key in ("ratio_by_state", "meets_targets", "states_counted"):
        before.pop(key, None)
    copy.write_text(json.dumps(before))
    run = subprocess.run(
        [sys.executable, os.path.join(BENCH, "run_collector_overhead.py"), "--rejudge", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    after = json.loads(copy.read_text())
    assert after["samples_us"] == before["samples_us"]
    assert after["states_counted"] == ["fast", "slow"]
    gpuleak = after["ratio_by_state"]["gpuleak"]
    assert 1.5 < gpuleak["fast"]["async"]["ratio"] < 2.0
    assert after["meets_targets"] is True
