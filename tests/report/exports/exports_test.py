#!/usr/bin/env python3
"""Every export of `gpuleak report --format` on shipped traces, opened by its consumer.

Runs the real gpuleak binary on traces recorded on the GPU (examples/traces), then the checker of
each format (this folder's README says what each proves). The expected top frames are the report's
own: its fastest-growing site for the growth views, so the flame graph's top frame is the leaking
site. Also the bad-input paths: an unknown format, -o missing, a memory_viz of several processes
without --pid, and an export to an unwritable path.

Usage: exports_test.py --gpuleak BUILD/gpuleak --node NODE --work DIR
Exit 0 all passed, 1 a check failed, 77 a consumer is missing (the checker said which).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TRACES = os.path.join(ROOT, "examples", "traces")
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's torch and jsonschema live there

failures = []
skipped = []


def run(cmd, timeout=240):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def check(name, cmd):
    r = run(cmd)
    out = (r.stdout + r.stderr).strip()
    if r.returncode == 77:
        skipped.append(f"{name}: {out.splitlines()[-1] if out else 'skipped'}")
        print(f"SKIP {name}")
    elif r.returncode != 0:
        failures.append(f"{name}: exit {r.returncode}: {out[-800:]}")
        print(f"FAIL {name}\n{out[-800:]}")
    else:
        print(f"ok   {name}: {out.splitlines()[-2] if len(out.splitlines()) > 1 else out}")


def report_json(gpuleak, trace):
    r = run([gpuleak, "report", "--json", trace])
    return json.loads(r.stdout)


def export(gpuleak, trace, fmt, path, *extra):
    r = run([gpuleak, "report", trace, "--format", fmt, "-o", path, *extra])
    if r.returncode != 0 or not os.path.exists(path):
        failures.append(f"export {fmt} of {trace}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
        return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuleak", required=True)
    ap.add_argument("--node", default="node")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    g = a.gpuleak
    cases = [
        ("torch", os.path.join(TRACES, "torch", "leak_eval_total_loss")),
        ("cuda", os.path.join(TRACES, "cuda", "forgot_free")),
        ("cupy", os.path.join(TRACES, "loops", "leak_cupy_concatenate_growth")),
    ]
    for case, trace in cases:
        rep = report_json(g, trace)
        process = rep["processes"][0]
        sites = process["growth"]["sites"]
        leak_groups = process["leaks"]["groups"]
        # The leaking site: the report's fastest-growing site, or the largest live group at exit.
        if sites:
            top = max(sites, key=lambda s: s["rate_bytes_per_step"])["site"]
        else:
            top = leak_groups[0]["site"]
        top_function = top["function"] or "?"
        title = f"pid {process['pid']} {process['command_line']}"
        if len(process["command_line"]) > 60:
            title = f"pid {process['pid']} {process['command_line'][:57]}..."
        view = "growth per step (bytes per step)" if sites else "live at exit (bytes)"
        base = os.path.join(a.work, case)
        files = {f: f"{base}.{f}" for f in ("memory_viz", "perfetto", "speedscope", "folded", "pprof", "csv")}
        ok = {f: export(g, trace, f, p, *([] if f != "folded" or sites else ["--view", "live-at-exit"]))
              for f, p in files.items()}
        if ok["memory_viz"]:
            # The snapshot is the live set at the end, where a program that
            # returned has freed its leak: its own file is in the frames.
            check(f"{case} memory_viz", [DEBIAN_PYTHON, os.path.join(HERE, "check_memory_viz.py"),
                                         files["memory_viz"], "--expect-frame", os.path.basename(top["file"])])
        if ok["speedscope"]:
            check(f"{case} speedscope", [a.node, os.path.join(HERE, "check_speedscope.mjs"), files["speedscope"],
                                         "--expect-profile", f"{title}: {view}",
                                         "--expect-top-frame", top_function, f"{title}: {view}"])
        if ok["folded"]:
            check(f"{case} folded", [DEBIAN_PYTHON, os.path.join(HERE, "check_folded.py"), files["folded"],
                                     "--expect-top-frame", top_function])
        if ok["pprof"]:
            index = "growth_bytes_per_step" if sites else "live_bytes"
            check(f"{case} pprof (go)", [DEBIAN_PYTHON, os.path.join(HERE, "check_pprof.py"), files["pprof"],
                                         "--sample-types",
                                         "growth_bytes_per_step,live_bytes,live_allocations,peak_live_bytes",
                                         "--expect-top", top_function, "--sample-index", index])
            check(f"{case} pprof (pprof-format)", [a.node, os.path.join(HERE, "check_pprof.mjs"), files["pprof"],
                                                   "--expect-top", top_function, "--sample-index", index])
        if ok["perfetto"]:
            cmd = [DEBIAN_PYTHON, os.path.join(HERE, "check_perfetto.py"), files["perfetto"],
                   "--expect-counter", "live device memory", "--expect-process-name", f"pid {process['pid']}"]
            if len(process["timeline"]["step"]) > 1:
                cmd += ["--expect-slices", "1", "--expect-counter", f"live bytes at {top['label']}"]
            check(f"{case} perfetto", cmd)
        if ok["csv"]:
            cmd = [DEBIAN_PYTHON, os.path.join(HERE, "check_csv.py"), files["csv"],
                   "--expect-columns", "pid,step,time_s,site_id,site,function,growing,live_bytes"]
            if len(process["timeline"]["step"]) > 0:
                cmd += ["--expect-rows-min", "1", "--expect-site", top["label"]]
            check(f"{case} csv", cmd)

    # Bad input: one clear message and the right status, never a crash.
    torch_trace = cases[0][1]
    bad = [
        ("unknown format", [g, "report", torch_trace, "--format", "svg", "-o", os.path.join(a.work, "x")], 2,
         "memory_viz, perfetto, speedscope, folded, pprof, csv"),
        ("format without -o", [g, "report", torch_trace, "--format", "csv"], 2, "needs -o"),
        ("memory_viz of two processes", [g, "report", os.path.join(TRACES, "cuda", "child_leak"),
                                         "--format", "memory_viz", "-o", os.path.join(a.work, "two.pickle")],
         3, "--pid"),
        ("unwritable output", [g, "report", torch_trace, "--format", "csv", "-o", "/proc/version/x.csv"], 3,
         "cannot write"),
        ("unknown pid", [g, "report", torch_trace, "--format", "csv", "--pid", "1", "-o",
                         os.path.join(a.work, "none.csv")], 3, "no trace of process 1"),
    ]
    for name, cmd, status, words in bad:
        r = run(cmd)
        if r.returncode != status or words not in r.stderr:
            failures.append(f"bad input '{name}': exit {r.returncode} (want {status}), stderr: {r.stderr.strip()[-300:]}")
            print(f"FAIL bad input {name}")
        else:
            print(f"ok   bad input {name}: {r.stderr.strip().splitlines()[-1]}")
    r = run([g, "report", os.path.join(TRACES, "cuda", "child_leak"), "--format", "memory_viz", "--pid", "461",
             "-o", os.path.join(a.work, "one.pickle")])
    if r.returncode != 0:
        failures.append(f"memory_viz --pid 461: exit {r.returncode}: {r.stderr.strip()}")

    print(f"{len(failures)} failed, {len(skipped)} skipped")
    for f in failures:
        print("FAILED:", f)
    if failures:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
