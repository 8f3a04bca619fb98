#!/usr/bin/env python3
"""The client matrix: gpuleak on the jobs people run, scored against examples/clients/clients.json.

For every case (a planted leak or a control written from public reports;
Lightning, HF Trainer, accelerate, torch.compile, torchrun, torch.profiler,
JAX, CuPy, plain CUDA C++) it runs

    <gpuleak> run -o <out>/<case> --json-report <out>/<case>/report.json -- <command>

up to --jobs cases at a time (each in its own process group, killed at
--timeout), and judges each labelled process of the report: verdict, cause,
holder, site (the `LEAK:` line or its function), iterations from warm-up to
the verdict, the capture backend that recorded it, and whether the
collector turned itself off. Then, one process at a time (timing), every
case marked "timing" runs --timing-steps steps without gpuleak and under
it: median step time of each (steps after the first 10), their ratio, and
the loop's own output (the loss of every step) compared between the two;
where they differ, the plain run once more, and the output counts as
unchanged when two plain runs differ too and gpuleak's difference is within
NONDETERMINISM_FACTOR (10) times theirs (output_unchanged).
Profiler cases must still have written their traces.

Writes <out>/summary.json (schema gpuleak-client-matrix/1: every case, its
checks, the exact commands, totals) and prints a table. A case that fails
to run is recorded as failed and the run goes on. Exit status 0 when every
check passed, 1 otherwise, 2 for bad arguments.

    python3 tests/gpu/client_matrix.py --gpuleak dist/gpuleak --programs dist/examples/clients --out /tmp/m

Standard library only; paths resolve from this file.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CLIENTS = os.path.join(REPO, "examples", "clients")
sys.path.insert(0, HERE)
from corpus_reports import holder_of, load_report, runs_program  # noqa: E402
from torch_corpus import describe_holder  # noqa: E402

SCHEMA = "gpuleak-client-matrix/1"
STEP_LINE = re.compile(r"^CLIENT_STEP(?:\[[^\]]*\])? (\{.*\})\s*$")
PROFILER_LINE = re.compile(r"^CLIENT_PROFILER (\{.*\})\s*$")
MARK = re.compile(r"(#|//) LEAK: ([a-z-]+)")
WARMUP_STEPS_FOR_TIMING = 10


def expand(word, programs, scratch):
    return word.replace("{programs}", programs).replace("{scratch}", scratch)


def run_command(argv, env, cwd, timeout, log_path):
    """(exit status or 'timeout', stdout text, seconds); stdout+stderr go to log_path."""
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ %s\n" % " ".join(argv))
        log.flush()
        try:
            child = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
            )
        except OSError as error:
            log.write("cannot start: %s\n" % error)
            return "cannot start: %s" % error, "", 0.0
        try:
            out, _ = child.communicate(timeout=timeout)
            status = child.returncode
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, _ = child.communicate()
            status = "timeout"
        log.write("--- stdout ---\n" + (out or ""))
    return status, out or "", time.monotonic() - started


def client_steps(stdout, key=None):
    """Parsed CLIENT_STEP records, optionally only those of one prefix ([script]) or rank."""
    steps = []
    for line in stdout.splitlines():
        match = STEP_LINE.match(line)
        if not match:
            continue
        if key is not None and ("[%s]" % key) not in line.split(" ", 1)[0]:
            continue
        try:
            steps.append(json.loads(match.group(1)))
        except ValueError:
            pass
    return steps


def profiler_facts(stdout):
    for line in stdout.splitlines():
        match = PROFILER_LINE.match(line)
        if match:
            try:
                return json.loads(match.group(1))
            except ValueError:
                return None
    return None


def marked_line(script_path):
    """(line number, cause) of the `LEAK:` marker, or (None, None)."""
    try:
        with open(script_path, errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                match = MARK.search(line)
                if match:
                    return number, match.group(2)
    except OSError:
        pass
    return None, None


def pick(report, label):
    """The report's process for a label: its script (and rank, for torchrun's two ranks)."""
    candidates = [p for p in report.get("processes", []) if isinstance(p, dict) and runs_program(p, label["script"])]
    if "rank" in label:
        candidates = [
            p
            for p in candidates
            if isinstance(p.get("distributed"), dict) and p["distributed"].get("rank") == label["rank"]
        ]
    if not candidates:
        return None
    pids = {p.get("pid") for p in candidates}
    top = [p for p in candidates if p.get("parent_pid") not in pids] or candidates
    return max(top, key=lambda p: (p.get("growth") or {}).get("steps") or 0)


def site_found(top_site, label, script_file):
    """'exact' (the marked line), 'function' (the labelled function) or 'no'."""
    if not isinstance(top_site, dict):
        return "no"
    location = top_site.get("site") if isinstance(top_site.get("site"), dict) else top_site
    line, cause = marked_line(script_file)
    if os.path.basename(str(location.get("file") or "")) == os.path.basename(script_file):
        if line is not None and location.get("line") == line:
            return "exact"
    function = str(location.get("function") or "")
    if label.get("site") and (
        function == label["site"] or function.endswith("." + label["site"]) or function.startswith(label["site"] + "(")
    ):
        return "function"
    return "no"


# Clients whose steps must come from torch's optimizer step hooks, with no
# callback (docs/client-matrix.md, "Steps without a callback").
OPTIMIZER_CLIENTS = {"lightning", "hf-trainer", "accelerate"}


def judge_process(report, label, script_file, client):
    process = pick(report, label) if report else None
    record = {
        "script": label["script"],
        "rank": label.get("rank"),
        "expected": {k: label.get(k) for k in ("verdict", "cause", "holder", "site")},
        "got": None,
        "checks": {},
    }
    checks = record["checks"]
    if process is None:
        record["error"] = "no process of the report runs %s" % label["script"]
        checks["found"] = False
        return record
    growth = process.get("growth") if isinstance(process.get("growth"), dict) else {}
    holder, _ = holder_of(growth)
    sites = growth.get("sites") if isinstance(growth.get("sites"), list) else []
    verdict_step, warmup = growth.get("verdict_step"), growth.get("warmup_steps")
    backend = process.get("capture_backend") if isinstance(process.get("capture_backend"), dict) else {}
    record["got"] = {
        "pid": process.get("pid"),
        "verdict": growth.get("verdict"),
        "cause": growth.get("cause"),
        "holder": describe_holder(holder),
        "top_site": (sites[0].get("site") if sites and isinstance(sites[0], dict) else None),
        "iterations_to_verdict": verdict_step - warmup
        if isinstance(verdict_step, int) and isinstance(warmup, int)
        else None,
        "steps": growth.get("steps"),
        "step_source": growth.get("step_source"),
        "step_sources": sorted(
            {growth.get("step_source")}
            | {ph.get("step_source") for ph in (growth.get("phases") or []) if isinstance(ph, dict)} - {None}
        ),
        "capture_backend": backend.get("name"),
        "capture_reason": backend.get("reason"),
        "start_requests": backend.get("start_requests"),
        "collector_disabled": process.get("collector_disabled"),
        "allocations": (process.get("events") or {}).get("allocations"),
        "framework_tracking": process.get("framework_tracking"),
        "note": growth.get("note"),
    }
    got = record["got"]
    checks["found"] = True
    checks["collector_on"] = not got["collector_disabled"]
    checks["recorded_allocations"] = bool(got["allocations"])
    checks["verdict"] = got["verdict"] == label["verdict"]
    if client in OPTIMIZER_CLIENTS:
        # Their optimizers are torch optimizers: torch's step hooks must mark the steps.
        checks["steps_from_optimizer_hook"] = "optimizer-hook" in got["step_sources"]
    if label["verdict"] == "LEAK":
        checks["cause"] = got["cause"] == label.get("cause")
        if label.get("holder") is not None:
            checks["holder"] = bool(holder) and holder.get("name") == label["holder"]
        match = site_found(sites[0] if sites else None, label, script_file)
        got["site_match"] = match
        checks["site"] = match != "no"
    return record


def scratch_dir(out, case_id, kind):
    path = os.path.join(out, "scratch", "%s-%s" % (case_id, kind))
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def case_argv(case, programs, scratch, steps=None):
    argv = [expand(w, programs, scratch) for w in case["command"]]
    if steps is not None:
        if "--steps" in argv:
            argv[argv.index("--steps") + 1] = str(steps)
        elif argv and argv[-1].isdigit():  # the CUDA programs take the count last
            argv[-1] = str(steps)
    return argv


def case_env(case):
    env = dict(os.environ)
    # Six cases share one GPU: JAX's default preallocation (75% of the device)
    # would starve the others, so it preallocates a quarter -- still one block
    # the driver sees, with every array hidden inside it.
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.25")
    env.update(case.get("env") or {})
    env["PYTHONUNBUFFERED"] = "1"
    return env


def script_file_of(case, programs):
    for word in case["command"]:
        if word.endswith(".py"):
            return os.path.join(CLIENTS, word)
    name = case["processes"][0]["script"]
    source = os.path.join(CLIENTS, "cuda", name + ".cu")
    return source if os.path.exists(source) else os.path.join(programs, name)


def verdict_run(case, args):
    """Runs one case under gpuleak and judges its processes."""
    case_out = os.path.join(args.out, case["id"])
    shutil.rmtree(case_out, ignore_errors=True)
    os.makedirs(case_out)
    scratch = scratch_dir(args.out, case["id"], "verdict")
    report_path = os.path.join(case_out, "report.json")
    argv = [
        args.gpuleak,
        "run",
        "-o",
        os.path.join(case_out, "traces"),
        "--json-report",
        report_path,
        "--",
    ] + case_argv(case, args.programs, scratch)
    status, stdout, seconds = run_command(
        argv, case_env(case), CLIENTS, args.timeout, os.path.join(case_out, "log.txt")
    )
    report, error = load_report(report_path)
    script_file = script_file_of(case, args.programs)
    processes = []
    for label in case["processes"]:
        record = judge_process(
            report,
            label,
            os.path.join(os.path.dirname(script_file), label["script"])
            if label["script"].endswith(".py")
            else script_file,
            case["client"],
        )
        if report is None:
            record["error"] = error
        processes.append(record)
    result = {
        "command": argv,
        "exit_status": status,
        "seconds": round(seconds, 1),
        "report_error": error,
        "processes": processes,
        "client_steps": len(client_steps(stdout)),
    }
    check = case.get("check") or {}
    if check:
        facts = profiler_facts(stdout)
        result["profiler"] = facts
        result["profiler_ok"] = (
            bool(facts)
            and facts.get("traces", 0) >= check.get("profiler_traces_at_least", 0)
            and facts.get("cuda_kernels", 0) >= check.get("profiler_cuda_kernels_at_least", 0)
        )
    # Only small files stay: the report and the log. Traces go.
    shutil.rmtree(os.path.join(case_out, "traces"), ignore_errors=True)
    result["losses"] = [s.get("loss") for s in client_steps(stdout)]
    return result


def median_step_ms(steps):
    times = [s["step_ms"] for s in steps[WARMUP_STEPS_FOR_TIMING:] if isinstance(s.get("step_ms"), (int, float))]
    return statistics.median(times) if times else None


def losses_of(steps):
    """Losses keyed by (rank, step), the loop's own output."""
    return {(s.get("rank", 0), s.get("step")): s.get("loss") for s in steps}


def compare_losses(a, b):
    common = sorted(set(a) & set(b))
    if not common:
        return {"steps_compared": 0, "max_rel_diff": None, "identical": False}
    worst = 0.0
    identical = True
    for key in common:
        x, y = a[key], b[key]
        if x != y:
            identical = False
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-12))
    return {"steps_compared": len(common), "max_rel_diff": worst, "identical": identical}


# How far the losses under gpuleak may stray from the plain run's, as a
# multiple of how far two plain runs stray from each other: a loop whose
# kernels accumulate with atomics (torch.compile's embedding backward) is not
# bit-reproducible by itself, and its rounding differs from run to run by
# amounts that themselves vary.
NONDETERMINISM_FACTOR = 10.0


def output_unchanged(traced_vs_plain, plain_vs_plain):
    """Whether gpuleak left the loop's own output as it was: losses identical to the plain
    run's, or, where two plain runs differ from each other, within NONDETERMINISM_FACTOR
    times that difference. None when it cannot be told (no steps compared)."""
    if not traced_vs_plain.get("steps_compared"):
        return None
    if traced_vs_plain["identical"]:
        return True
    if not plain_vs_plain or not plain_vs_plain.get("steps_compared") or plain_vs_plain["identical"]:
        return False  # plain runs agree bit for bit: any difference is gpuleak's
    return traced_vs_plain["max_rel_diff"] <= NONDETERMINISM_FACTOR * plain_vs_plain["max_rel_diff"]


def timing_run(case, args):
    """The case without gpuleak, then under it, one at a time: step times and losses. When the
    losses differ, the plain run once more: how much the loop varies by itself."""
    out = {}
    steps_by_kind = {}
    for kind in ("plain", "gpuleak", "plain-again"):
        if kind == "plain-again":
            if not steps_by_kind["gpuleak"] or losses_of(steps_by_kind["plain"]) == losses_of(steps_by_kind["gpuleak"]):
                break
        scratch = scratch_dir(args.out, case["id"], "timing-" + kind)
        argv = case_argv(case, args.programs, scratch, steps=args.timing_steps)
        if kind == "gpuleak":
            argv = [args.gpuleak, "run", "-q", "--no-live", "-o", os.path.join(scratch, "traces"), "--"] + argv
        status, stdout, seconds = run_command(
            argv, case_env(case), CLIENTS, args.timeout, os.path.join(args.out, case["id"], "timing-%s.txt" % kind)
        )
        steps = client_steps(stdout)
        steps_by_kind[kind] = steps
        out[kind] = {
            "command": argv,
            "exit_status": status,
            "seconds": round(seconds, 1),
            "steps": len(steps),
            "median_step_ms": median_step_ms(steps),
        }
        shutil.rmtree(scratch, ignore_errors=True)
    plain, traced = out["plain"]["median_step_ms"], out["gpuleak"]["median_step_ms"]
    out["step_time_ratio"] = round(traced / plain, 3) if plain and traced else None
    out["losses"] = compare_losses(losses_of(steps_by_kind["plain"]), losses_of(steps_by_kind["gpuleak"]))
    plain_again = steps_by_kind.get("plain-again")
    if plain_again is not None:
        out["losses_plain_vs_plain"] = compare_losses(losses_of(steps_by_kind["plain"]), losses_of(plain_again))
    out["output_unchanged"] = output_unchanged(out["losses"], out.get("losses_plain_vs_plain"))
    return out


def package_versions():
    """Installed versions of the clients, read from package metadata (nothing imported)."""
    from importlib import metadata

    versions = {"python": sys.version.split()[0]}
    for name in (
        "torch",
        "lightning",
        "pytorch-lightning",
        "transformers",
        "accelerate",
        "jax",
        "jaxlib",
        "cupy-cuda13x",
        "cupy-cuda12x",
    ):
        try:
            versions[name] = metadata.version(name)
        except Exception:
            pass
    return versions


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpuleak", required=True)
    parser.add_argument("--programs", required=True, help="folder of the built CUDA programs")
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", default=os.path.join(CLIENTS, "clients.json"))
    parser.add_argument("--only", default="", help="comma-separated case ids (default: all)")
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--timeout", type=int, default=150)
    parser.add_argument("--timing-steps", type=int, default=60)
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    args.gpuleak = os.path.abspath(args.gpuleak)
    args.programs = os.path.abspath(args.programs)
    os.makedirs(args.out, exist_ok=True)
    with open(args.cases) as handle:
        cases = json.load(handle)["cases"]
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c["id"] in wanted]
    if not cases:
        print("client_matrix: no cases", file=sys.stderr)
        return 2

    started = time.monotonic()
    results = {}
    # Slow starters first, so the pool stays busy to the end.
    order = sorted(cases, key=lambda c: 0 if ("compile" in c["id"] or "hf" in c["id"] or "lightning" in c["id"]) else 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(verdict_run, case, args): case["id"] for case in order}
        for future in concurrent.futures.as_completed(futures):
            case_id = futures[future]
            try:
                results[case_id] = future.result()
            except Exception as error:  # a broken case is a failed case, not a broken run
                results[case_id] = {"error": "%s: %s" % (type(error).__name__, error), "processes": []}
    verdict_seconds = time.monotonic() - started
    if not args.no_timing:
        for case in cases:
            if case.get("timing"):
                try:
                    results[case["id"]]["timing"] = timing_run(case, args)
                except Exception as error:
                    results[case["id"]]["timing"] = {"error": "%s: %s" % (type(error).__name__, error)}
    shutil.rmtree(os.path.join(args.out, "scratch"), ignore_errors=True)

    rows, all_ok = [], True
    totals = {
        "leak_processes": 0,
        "leaks_found": 0,
        "control_processes": 0,
        "controls_clean": 0,
        "collector_off": 0,
        "checks_failed": 0,
        "outputs_changed": 0,
    }
    for case in cases:
        result = results[case["id"]]
        case_ok = "error" not in result
        for p in result.get("processes", []):
            leak = p["expected"]["verdict"] == "LEAK"
            totals["leak_processes" if leak else "control_processes"] += 1
            if p["checks"].get("verdict"):
                totals["leaks_found" if leak else "controls_clean"] += 1
            if p["checks"].get("collector_on") is False:
                totals["collector_off"] += 1
            failed = [k for k, v in p["checks"].items() if v is False]
            totals["checks_failed"] += len(failed)
            p["pass"] = not failed
            case_ok = case_ok and p["pass"]
        if result.get("profiler_ok") is False:
            case_ok = False
        timing = result.get("timing") or {}
        if timing.get("losses") and not timing["losses"].get("steps_compared"):
            case_ok = False
        if timing.get("output_unchanged") is False:
            case_ok = False
            totals["outputs_changed"] += 1
        result["pass"] = case_ok
        all_ok = all_ok and case_ok
        for p in result.get("processes", []) or [{"script": "?", "got": None, "expected": {}}]:
            got = p.get("got") or {}
            rows.append(
                (
                    case["id"],
                    p.get("script", "?")[:34] + ("" if p.get("rank") is None else "#%d" % p["rank"]),
                    p["expected"].get("verdict"),
                    got.get("verdict"),
                    got.get("cause"),
                    (got.get("holder") or "-")[:28],
                    got.get("iterations_to_verdict"),
                    got.get("capture_backend"),
                    timing.get("step_time_ratio"),
                    (timing.get("losses") or {}).get("max_rel_diff"),
                    "ok" if p.get("pass") else "FAIL",
                )
            )

    summary = {
        "schema": SCHEMA,
        "versions": package_versions(),
        "commit": open(os.path.join(os.path.dirname(args.gpuleak), "COMMIT")).read().strip()
        if os.path.exists(os.path.join(os.path.dirname(args.gpuleak), "COMMIT"))
        else None,
        "what": "each case of examples/clients/clients.json under `gpuleak run`: per labelled process "
        "verdict/cause/holder/site against the labels, iterations from warm-up to the verdict, "
        "the capture backend, whether the collector stayed on; for timing cases the median step "
        "time without and with gpuleak (one process at a time, steps after the first %d) and "
        "the largest relative difference of the loop's own loss values" % WARMUP_STEPS_FOR_TIMING,
        "pass": all_ok,
        "totals": totals,
        "seconds": {"verdicts": round(verdict_seconds, 1), "total": round(time.monotonic() - started, 1)},
        "cases": [dict(results[c["id"]], id=c["id"], client=c["client"], reports=c.get("reports")) for c in cases],
    }
    for case in summary["cases"]:
        case.pop("losses", None)
    with open(os.path.join(args.out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)

    header = ("case", "process", "want", "got", "cause", "holder", "iters", "backend", "time x", "loss diff", "")
    print("%-30s %-36s %-7s %-7s %-26s %-28s %5s %-10s %6s %9s %s" % header)
    for row in rows:
        print(
            "%-30s %-36s %-7s %-7s %-26s %-28s %5s %-10s %6s %9s %s"
            % tuple("-" if v is None else ("%.3g" % v if isinstance(v, float) else v) for v in row)
        )
    print(
        "leaks found %d/%d, controls clean %d/%d, collector off in %d, checks failed %d; %s"
        % (
            totals["leaks_found"],
            totals["leak_processes"],
            totals["controls_clean"],
            totals["control_processes"],
            totals["collector_off"],
            totals["checks_failed"],
            "PASS" if all_ok else "FAIL",
        )
    )
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
