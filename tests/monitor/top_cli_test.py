"""`gpuleak top` as a real child process: JSON lines with trends and leak
flags for a process whose host RSS really grows and one whose GPU memory
grows (stand-in driver), plain text in pipes, clear errors."""
import json
import signal
import subprocess

from process_fixtures import GPULEAK, gpuleak_env, run_gpuleak, start_holder, start_rss_grower, write_nvml_state

MiB = 1 << 20
GiB = 1 << 30


def top_samples(args, env):
    result = run_gpuleak(["top", "--json", *args], env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    return [json.loads(line) for line in lines]


def process_in(sample, pid):
    return next((p for p in sample["processes"] if p["pid"] == pid), None)


def test_growing_host_rss_is_flagged_and_a_flat_one_is_not(device, started):
    growing = start_rss_grower(started, step_mib=4, period_s=0.1)
    flat = start_rss_grower(started, step_mib=0, period_s=0.1)
    samples = top_samples(
        ["--interval", "0.2", "--count", "30", "--pid", str(growing), "--pid", str(flat)], gpuleak_env(device)
    )
    assert len(samples) == 30
    assert [s["sample"] for s in samples] == list(range(30))
    flagged = [s["sample"] for s in samples if process_in(s, growing)["host_rss_leak"]]
    assert flagged, "the growing process was never flagged"
    last = process_in(samples[-1], growing)
    assert last["host_rss_leak"] is True
    assert last["host_rss_growth_bytes_per_s"] > 5 * MiB
    assert last["seconds_until_host_full"] > 0
    assert last["watched"] is True
    assert not any(process_in(s, flat)["host_rss_leak"] for s in samples)
    assert samples[-1]["nvml"]["available"] is False


def test_growing_gpu_memory_is_flagged_with_time_until_the_device_is_full(device, started):
    leaker = start_holder(started, device)
    steady = start_holder(started, device)
    state = write_nvml_state(
        device,
        [
            f"device GPU-1111-stand-in {80 * GiB} {3 * GiB} {512 * MiB} Stand-in H200",
            f"process 0 {leaker} {GiB} {64 * MiB}",
            f"process 0 {steady} {2 * GiB}",
        ],
    )
    samples = top_samples(["--interval", "0.2", "--count", "25"], gpuleak_env(device, state))
    last = samples[-1]
    leak = process_in(last, leaker)
    assert leak["gpu_leak"] is True
    assert 32 * MiB < leak["gpu_growth_bytes_per_s"] < 128 * MiB
    assert leak["gpu"][0]["device_uuid"] == "GPU-1111-stand-in"
    assert leak["gpu"][0]["leak"] is True
    assert 0 < leak["seconds_until_device_full"] < 80 * GiB / (32 * MiB)
    assert process_in(last, steady)["gpu_leak"] is False
    assert last["devices"][0]["leak"] is True
    assert last["devices"][0]["seconds_until_full"] > 0
    # The most GPU memory comes first.
    assert [p["pid"] for p in last["processes"]][:1] in ([leaker], [steady])


def test_plain_output_in_a_pipe_has_no_terminal_codes(device, started):
    holder = start_holder(started, device)
    result = run_gpuleak(["top", "--interval", "0.1", "--count", "2"], gpuleak_env(device))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert result.stdout.count("gpuleak top") == 2
    assert result.stdout.count("PID USER") == 2
    assert str(holder) in result.stdout
    assert "NVML is not available" in result.stdout
    assert "NVML is not available" in result.stderr  # said once where people look


def test_sigterm_ends_top_cleanly(device):
    process = subprocess.Popen(
        [GPULEAK, "top", "--json", "--interval", "0.2"], env=gpuleak_env(device), stdout=subprocess.PIPE, text=True
    )
    try:
        first = process.stdout.readline()
        assert json.loads(first)["sample"] == 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        for line in process.stdout.read().splitlines():
            json.loads(line)  # no half-written line
    finally:
        process.kill()
        process.wait()


def test_bad_flags_exit_2_with_one_line(device):
    for args in (
        ["top", "--interval", "0"],
        ["top", "--pid", "-3"],
        ["top", "--bogus"],
        ["top", "--min-growth", "lots"],
    ):
        result = run_gpuleak(args, gpuleak_env(device))
        assert result.returncode == 2, args
        assert result.stderr.startswith("gpuleak: ")
