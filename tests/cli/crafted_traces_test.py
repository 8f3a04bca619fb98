"""The crafted-trace corpus (tests/cli/crafted_traces/) through the real
`gpuleak report`: every case's files are written by craft_trace, every run
is a child process limited to 30 s, and its peak RSS (getrusage of the
child) must stay under 1 GiB; then the documented answer is checked (exit
status, what stdout/stderr say, JSON fields) and no run may show what a case
lists as never shown (the first line of /etc/passwd, the environment)."""
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

GPULEAK = os.environ["GPULEAK_BIN"]
CRAFT_TRACE = os.environ["CRAFT_TRACE_BIN"]
CASES = sorted((Path(__file__).parent / "crafted_traces").glob("*.json"))
CANARY = "gpuleak-canary-5a17c0de"
MAX_SECONDS = 30
MAX_RSS_BYTES = 1 << 30
HUGE_BYTES = 4 << 30


def first_line(path):
    with open(path, "rb") as f:
        return f.readline().rstrip(b"\n").decode("utf-8", "surrogateescape")


def resolve(text, case_dir):
    return (
        text.replace("{dir}", str(case_dir))
        .replace("{fifo}", str(case_dir / "fifo"))
        .replace("{huge}", str(case_dir / "huge"))
    )


def never_shown_strings(case):
    out = []
    for item in case.get("never_shown", []):
        if item.startswith("{first_line:"):
            line = first_line(item[len("{first_line:") : -1])
            if line:
                out.append(line)
        elif item.startswith("{env:"):
            out.append(os.environ.get(item[len("{env:") : -1], CANARY) or CANARY)
        else:
            out.append(item)
    return out


def make_special(path, kind):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(HUGE_BYTES)  # sparse: zeros, no newline
    elif kind.startswith("symlink:"):
        os.symlink(kind[len("symlink:") :], path)
    else:
        raise ValueError(kind)


def prepare(case, case_dir):
    """Writes the case's files (and the FIFO and the huge file its strings
    may name) into case_dir."""
    make_special(case_dir / "fifo", "fifo")
    make_special(case_dir / "huge", "huge")
    resolved = json.loads(resolve(json.dumps(case), case_dir))
    for name, spec in resolved["files"].items():
        if "special" in spec:
            make_special(case_dir / name, spec["special"])
    spec_path = case_dir / "case.json"
    spec_path.write_text(json.dumps(resolved))
    subprocess.run([CRAFT_TRACE, str(spec_path), str(case_dir)], check=True, timeout=300)
    spec_path.unlink()


def run_limited(args, env):
    """Runs gpuleak with a wall-clock limit; returns (exit status, stdout,
    stderr, seconds, peak RSS bytes), the peak from wait4() of this child."""
    started = time.monotonic()
    process = subprocess.Popen(
        [GPULEAK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    chunks = {"out": [], "err": []}
    readers = [
        threading.Thread(target=lambda s=stream, k=key: chunks[k].extend(iter(lambda: s.read(65536), b"")))
        for key, stream in (("out", process.stdout), ("err", process.stderr))
    ]
    for r in readers:
        r.start()
    status = rusage = None
    while True:
        pid, raw_status, rusage = os.wait4(process.pid, os.WNOHANG)
        if pid == process.pid:
            status = os.waitstatus_to_exitcode(raw_status)
            break
        if time.monotonic() - started > MAX_SECONDS:
            os.killpg(process.pid, signal.SIGKILL)
            os.wait4(process.pid, 0)
            for r in readers:
                r.join()
            pytest.fail(f"gpuleak {' '.join(args)} ran past {MAX_SECONDS} s")
        time.sleep(0.01)
    process.returncode = status
    for r in readers:
        r.join()
    seconds = time.monotonic() - started
    return status, b"".join(chunks["out"]), b"".join(chunks["err"]), seconds, rusage.ru_maxrss * 1024


def json_value(document, dotted):
    value = document
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def expected_value(expected):
    if isinstance(expected, dict) and "bytes_hex" in expected:
        return bytes.fromhex(expected["bytes_hex"]).decode("utf-8", "surrogateescape")
    return expected


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_crafted_trace_gets_its_documented_answer(case_path, tmp_path):
    case = json.loads(case_path.read_text())
    assert case["reported"].startswith("https://"), "every case names where it was reported"
    prepare(case, tmp_path)
    env = dict(os.environ, GPULEAK_CANARY=CANARY)
    never = never_shown_strings(case)
    for run in case["runs"]:
        args = [resolve(a, tmp_path) for a in run["args"]]
        status, out, err, seconds, peak = run_limited(args, env)
        where = f"gpuleak {' '.join(args)}\n--- stdout\n{out[-3000:]!r}\n--- stderr\n{err[-3000:]!r}"
        assert status == run["exit"], where
        assert seconds < MAX_SECONDS, where
        assert peak < MAX_RSS_BYTES, f"{peak >> 20} MiB peak RSS: {where}"
        text_out = out.decode("utf-8", "surrogateescape")
        text_err = err.decode("utf-8", "surrogateescape")
        for needle in run.get("stdout_has", []):
            assert needle in text_out, f"stdout lacks {needle!r}: {where}"
        for needle in run.get("stderr_has", []):
            assert needle in text_err, f"stderr lacks {needle!r}: {where}"
        for needle in run.get("stdout_lacks", []):
            assert needle not in text_out, f"stdout has {needle!r}: {where}"
        if "json" in run:
            document = json.loads(text_out)
            for dotted, expected in run["json"].items():
                assert json_value(document, dotted) == expected_value(expected), (dotted, where)
        for needle in never:
            blob = needle.encode("utf-8", "surrogateescape")
            assert blob not in out and blob not in err, f"{needle!r} was shown: {where}"
            for written in tmp_path.iterdir():
                if written.is_file() and written.suffix in (".html", ".json"):
                    assert blob not in written.read_bytes(), f"{needle!r} is in {written.name}"


EXPORT_FORMATS = ("memory_viz", "perfetto", "speedscope", "folded", "pprof", "csv")


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_every_export_of_a_crafted_trace_is_written_or_refused_in_one_line(case_path, tmp_path):
    """The exports (docs/exports.md) read the same crafted traces: each format
    is written whole (exit 0, or 3 when the trace is damaged and reported up to
    the damage) or refused with one `gpuleak:` line, within the time and memory
    bounds, and shows nothing a case lists as never shown."""
    case = json.loads(case_path.read_text())
    prepare(case, tmp_path)
    env = dict(os.environ, GPULEAK_CANARY=CANARY)
    never = never_shown_strings(case)
    traces = sorted(str(p) for p in tmp_path.iterdir() if p.name.endswith(".trace") and p.is_file())
    for trace in traces:
        for fmt in EXPORT_FORMATS:
            output = tmp_path / f"export.{fmt}"
            if output.exists():
                output.unlink()
            status, out, err, seconds, peak = run_limited(["report", trace, "--format", fmt, "-o", str(output)], env)
            where = f"gpuleak report {trace} --format {fmt}\n--- stderr\n{err[-2000:]!r}"
            assert status in (0, 3), where
            assert peak < MAX_RSS_BYTES, f"{peak >> 20} MiB peak RSS: {where}"
            if status == 0:
                assert output.exists(), where
                # Only a flame graph with nothing to draw may be empty, and it says so.
                assert output.stat().st_size > 0 or b"nothing to draw" in err, where
            assert not (tmp_path / f"export.{fmt}.partial").exists(), "a partial export was left behind"
            written = output.read_bytes().decode("utf-8", "surrogateescape") if output.exists() else ""
            for secret in never:
                assert secret not in written, f"the {fmt} export shows {secret!r}: {where}"
