"""Running one corpus case under a time limit, for the GPU corpus runners
(torch_corpus.py, loops_corpus.py, holder_corpus.py)."""
import os
import shlex
import signal
import subprocess
import time


def run_command(command, log_path, timeout_s, env, cwd):
    """Runs command in its own session, its output to log_path; on timeout kills that whole
    process group (SIGTERM, then SIGKILL). Returns (rc, wall_s, timed_out); rc is None when it
    could not start."""
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ %s\n" % " ".join(shlex.quote(word) for word in command))
        log.flush()
        try:
            child = subprocess.Popen(
                command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as error:
            log.write("cannot start: %s\n" % error)
            return None, 0.0, False
        try:
            rc = child.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig, grace_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(child.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    child.wait(timeout=grace_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
            rc = child.poll()
            log.write("\nkilled after %d s\n" % timeout_s)
    return rc, round(time.monotonic() - started, 2), timed_out


def report_on_traces(gpuleak, traces, report_path, timeout_s):
    """`gpuleak report --json` on traces recorded earlier, into report_path (a rescore: no GPU).
    Returns its exit status, None when it ran past timeout_s."""
    try:
        with open(report_path, "wb") as out:
            return subprocess.run(
                [gpuleak, "report", "--json"] + traces, stdout=out, stderr=subprocess.DEVNULL, timeout=timeout_s
            ).returncode
    except subprocess.TimeoutExpired:
        return None
