"""A day-long job through the real bounded trace writer, then `gpuleak report`.

bench/cpu/long_job writes 24 hours of simulated training (a working set,
churn from two threads, a rolling cache, a step mark a second) with the
trace bounded to 16 MiB, checking the file's size from outside after every
block; the rate is scaled down (40 allocations/s) so CI takes seconds, the
simulated duration is not. The report of the compacted trace must give LEAK
at the leaking line for the leaking job and NO LEAK for the clean one, and
say the trace was compacted.
"""
import json
import os
import subprocess

import pytest

GPULEAK = os.environ["GPULEAK_BIN"]
LONG_JOB = os.environ["LONG_JOB_BIN"]
BOUND = 16 << 20


def run_day(tmp_path, shape):
    trace = tmp_path / f"gpuleak-{shape}.trace"
    done = subprocess.run(
        [LONG_JOB, str(trace), "--shape", shape, "--hours", "24", "--rate", "40", "--bound", str(BOUND)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    report = subprocess.run(
        [GPULEAK, "report", "--json", str(trace)], capture_output=True, text=True, timeout=120, check=False
    )
    assert report.returncode in (0, 1), report.stderr
    return facts, json.loads(report.stdout)["processes"][0]


@pytest.mark.parametrize("shape", ["leak", "clean"])
def test_a_day_long_job_stays_under_its_bound_and_is_judged_right(tmp_path, shape):
    facts, process = run_day(tmp_path, shape)
    assert facts["steps"] == 86400
    assert facts["largest_disk_bytes"] <= BOUND
    assert facts["compactions"] >= 3, facts
    # Without the bound the stream's encoded records alone would be many
    # times the bound.
    assert facts["raw_stream_bytes"] > 8 * BOUND

    compaction = process["compaction"]
    assert compaction["compactions"] == facts["compactions"]
    assert compaction["bound_bytes"] == BOUND
    assert compaction["summarized_until_s"] > 20 * 3600
    assert compaction["steps"], "the summarized steps keep a coarse history"
    assert process["verdict"]["complete"]
    if shape == "leak":
        assert process["verdict"]["name"] == "LEAK"
        sites = process["growth"]["sites"]
        assert sites and "accumulate_metrics" in json.dumps(sites[0]["site"])
        assert sites[0]["rate_bytes_per_step"] == pytest.approx(4096, rel=0.05)
        # The leak's blocks of the whole day are live in the report (as of
        # the last step mark), the summarized ones included, not only the
        # raw tail's.
        assert sites[0]["live_allocations"] >= 86390
    else:
        assert process["verdict"]["name"] == "NO LEAK"


@pytest.mark.parametrize("shape", ["leak", "clean"])
def test_the_collector_compacts_its_trace_under_gpuleak_run(tmp_path, shape):
    """The same through the collector itself: its writer thread compacts."""
    program = os.path.join(os.path.dirname(__file__), "fake_long_train.py")
    leak_line = next(i for i, line in enumerate(open(program), 1) if "# LEAK" in line)
    traces = tmp_path / "traces"
    done = subprocess.run(
        [
            GPULEAK,
            "run",
            "-q",
            "-o",
            str(traces),
            "--trace-max-bytes",
            "16M",
            "--json-report",
            str(tmp_path / "report.json"),
            "--",
            "/usr/bin/python3",
            program,
            "60000",
            shape,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "collector disabled" not in done.stderr
    (trace,) = [p for p in traces.iterdir() if p.suffix == ".trace"]
    assert trace.stat().st_size <= BOUND
    assert not list(traces.glob("*.compacting"))
    process = json.loads((tmp_path / "report.json").read_text())["processes"][0]
    assert process["compaction"] and process["compaction"]["compactions"] >= 1
    assert process["events"]["allocations"] >= 60000 * 40
    assert process["verdict"]["complete"]
    if shape == "leak":
        assert process["verdict"]["name"] == "LEAK"
        site = process["growth"]["sites"][0]["site"]
        assert site["line"] == leak_line and site["file"].endswith("fake_long_train.py")
    else:
        assert process["verdict"]["name"] == "NO LEAK"
