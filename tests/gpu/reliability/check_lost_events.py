"""Lost events on the GPU (tests/gpu/suites/reliability.sh).

usage: python3 check_lost_events.py --gpuleak GPULEAK --stress STRESS_BINARY --out DIR

Runs the stress example twice under `gpuleak run`: once with the default
buffer (control: nothing may be lost) and once with GPULEAK_BUFFER_BYTES=262144
and GPULEAK_FLUSH_MS=200 while one busy process per CPU competes with it, so
that the collector must drop events. Then reads each trace with
`gpuleak report --json` (peak RSS from wait4) and checks:
  - the lossy run lost events, and every lost sequence number was declared
    by range (lost_ranged_seqs > 0, lost_counted_seqs == 0);
  - no damage is claimed and the trace has no error (drops are not damage);
  - recorded allocations + frees + lost numbers cover every event the
    program made (1,600,036 allocations and frees);
  - the verdict says data is missing (verdict.complete false, a reason that
    names lost events) and `report --fail-on-leak` exits 1 (leaks) or 3;
  - report's peak RSS stays under 1 GiB and it finishes within 60 s;
  - the control lost nothing and reports exactly 36 x 4096 bytes leaked.
Writes DIR/summary.json and prints a table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

EXPECTED_EVENTS = 8 * 100000 * 2 + 36
MAX_RSS_BYTES = 1 << 30


def report_with_rusage(gpuleak, args):
    """Runs gpuleak report, returning (status, stdout, stderr, seconds, peak RSS bytes)."""
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        out_fd = os.open("/tmp/gpuleak-report-out.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err_fd = os.open("/tmp/gpuleak-report-err.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.execv(gpuleak, [gpuleak, "report", *args])
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - started
    with open("/tmp/gpuleak-report-out.json", "rb") as f:
        out = f.read()
    with open("/tmp/gpuleak-report-err.txt", "rb") as f:
        err = f.read()
    return os.waitstatus_to_exitcode(status), out, err, seconds, usage.ru_maxrss * 1024


def start_load():
    busy = []
    for cpu in range(os.cpu_count() or 1):
        busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
    return busy


def gpuleak_run(gpuleak, stress, out_dir, env_extra):
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    env = dict(os.environ, **env_extra)
    started = time.monotonic()
    proc = subprocess.run(
        [gpuleak, "run", "-q", "--no-live", "-o", out_dir, "--", stress],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=200,
    )
    return proc, time.monotonic() - started


def traces_of(out_dir):
    return sorted(os.path.join(out_dir, f) for f in os.listdir(out_dir) if f.endswith(".trace"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpuleak", required=True)
    parser.add_argument("--stress", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    checks = []

    def check(name, ok, saw):
        checks.append({"check": name, "ok": bool(ok), "saw": saw})

    # Control: the default buffer.
    control_dir = "/tmp/gpuleak-reliability-control"
    proc, seconds = gpuleak_run(args.gpuleak, args.stress, control_dir, {})
    check(
        "control: the program ran to its end under gpuleak run",
        "done" in proc.stdout,
        {"exit": proc.returncode, "seconds": round(seconds, 1), "stderr_tail": proc.stderr[-400:]},
    )
    control_traces = traces_of(control_dir)
    status, out, err, seconds, peak = report_with_rusage(args.gpuleak, ["--json", *control_traces])
    control = json.loads(out)["processes"][0] if out else {}
    events = control.get("events", {})
    check(
        "control: nothing lost, no damage, no trace error",
        events.get("lost") == 0 and control.get("damage") == [] and control.get("trace_error") is None,
        {"events": events, "damage": control.get("damage"), "trace_error": control.get("trace_error")},
    )
    check(
        "control: exactly 36 x 4096 bytes leaked, verdict LEAKED, complete",
        control.get("leaks", {}).get("bytes") == 36 * 4096
        and control.get("verdict", {}).get("name") == "LEAKED"
        and control.get("verdict", {}).get("complete") is True,
        {"leaks_bytes": control.get("leaks", {}).get("bytes"), "verdict": control.get("verdict")},
    )

    # Lossy: a small buffer and every CPU busy.
    lossy_dir = "/tmp/gpuleak-reliability-lossy"
    busy = start_load()
    try:
        proc, run_seconds = gpuleak_run(
            args.gpuleak, args.stress, lossy_dir, {"GPULEAK_BUFFER_BYTES": "262144", "GPULEAK_FLUSH_MS": "200"}
        )
    finally:
        for b in busy:
            b.kill()
        for b in busy:
            b.wait()
    check(
        "lossy: the program ran to its end (dropping never blocks or fails it)",
        "done" in proc.stdout and proc.returncode == 0,
        {"exit": proc.returncode, "seconds": round(run_seconds, 1), "stderr_tail": proc.stderr[-400:]},
    )
    lossy_traces = traces_of(lossy_dir)
    status, out, err, seconds, peak = report_with_rusage(args.gpuleak, ["--json", *lossy_traces])
    document = json.loads(out) if out else {"processes": [{}]}
    p = document["processes"][0]
    events = p.get("events", {})
    check(
        "lossy: events were lost, each lost number declared by range",
        events.get("lost", 0) > 0 and events.get("lost_ranged_seqs", 0) > 0 and events.get("lost_counted_seqs") == 0,
        {"events": events},
    )
    check(
        "lossy: no damage claimed, no trace error, report exit 0",
        p.get("damage") == [] and p.get("trace_error") is None and status == 0,
        {
            "damage": p.get("damage"),
            "trace_error": p.get("trace_error"),
            "exit": status,
            "stderr": err.decode(errors="replace")[-400:],
        },
    )
    covered = events.get("allocations", 0) + events.get("frees", 0) + events.get("lost_ranged_seqs", 0)
    check(
        "lossy: recorded + lost numbers cover every allocation and free the program made",
        EXPECTED_EVENTS <= covered <= EXPECTED_EVENTS + 10000,
        {
            "allocations": events.get("allocations"),
            "frees": events.get("frees"),
            "lost_ranged_seqs": events.get("lost_ranged_seqs"),
            "covered": covered,
            "expected_at_least": EXPECTED_EVENTS,
        },
    )
    verdict = p.get("verdict", {})
    check(
        "lossy: the verdict says data is missing (never a clean bill)",
        verdict.get("complete") is False
        and verdict.get("name") in ("LEAKED", "INCOMPLETE", "LEAK")
        and any("lost" in reason for reason in verdict.get("incomplete", [])),
        {"verdict": verdict},
    )
    check(
        "lossy: report's peak RSS under 1 GiB, within 60 s",
        peak < MAX_RSS_BYTES and seconds < 60,
        {
            "peak_rss_mib": peak >> 20,
            "seconds": round(seconds, 2),
            "trace_bytes": sum(os.path.getsize(t) for t in lossy_traces),
        },
    )
    gate, _, gate_err, _, _ = report_with_rusage(args.gpuleak, ["--fail-on-leak", *lossy_traces])
    check(
        "lossy: report --fail-on-leak does not pass (exit 1: leaks, or 3: data missing)",
        gate in (1, 3),
        {"exit": gate, "stderr": gate_err.decode(errors="replace")[-300:]},
    )
    text_status, text_out, _, _, _ = report_with_rusage(args.gpuleak, lossy_traces)
    text = text_out.decode(errors="replace")
    check(
        "lossy: the text report says how many events were lost and does not say 'No leaks'",
        "events were lost by the collector" in text and "No leaks" not in text,
        {"verdict_line": next((l for l in text.splitlines() if "Verdict:" in l), None)},
    )

    summary = {
        "suite": "reliability",
        "what": __doc__.strip().splitlines()[0],
        "passed": sum(c["ok"] for c in checks),
        "total": len(checks),
        "checks": checks,
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for c in checks:
        print(("PASS " if c["ok"] else "FAIL ") + c["check"])
        if not c["ok"]:
            print("     saw: " + json.dumps(c["saw"])[:600])
    print(f"{summary['passed']}/{summary['total']} checks passed")
    for d in (control_dir, lossy_dir):
        shutil.rmtree(d, ignore_errors=True)
    return 0 if summary["passed"] == summary["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
