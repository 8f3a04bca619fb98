"""Runs every CUDA example under `gpuleak run` on the GPU machine and checks
the report against the `// LEAK <count> x <bytes>` markers in the sources:
exact leaked bytes and allocation counts at the marked file:line, nothing
else reported, the clean example clean, both processes of child_leak
reported, the out-of-memory event recorded with the live set, and exact
accounting for 8 threads x 100k alloc/free pairs.

usage: python3 check_cuda_examples.py GPULEAK EXAMPLES_BIN_DIR EXAMPLES_SRC_DIR OUT_DIR
Writes OUT_DIR/cuda-examples.json and prints a table.
"""
import json
import os
import re
import subprocess
import sys
import time

MARKER = re.compile(r"//\s*LEAK\s+(\d+)\s+x\s+(\w+)(?:\s+(\w+))?")


def markers(source):
    found = []
    with open(source) as f:
        for number, text in enumerate(f, 1):
            m = MARKER.search(text)
            if m:
                found.append({"line": number, "count": int(m.group(1)), "bytes": m.group(2), "process": m.group(3)})
    return found


def run_example(gpuleak, binary, out_dir):
    report_file = os.path.join(out_dir, "report.json")
    started = time.time()
    proc = subprocess.run(
        [gpuleak, "run", "-o", os.path.join(out_dir, "traces"), "--json-report", report_file, "--", binary],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    seconds = time.time() - started
    with open(os.path.join(out_dir, "stderr.txt"), "w") as f:
        f.write(proc.stderr)
    report = None
    if os.path.exists(report_file):
        with open(report_file) as f:
            report = json.load(f)
    return proc, report, seconds


def group_at(process, file_name, line):
    for g in process["leaks"]["groups"]:
        if os.path.basename(g["site"]["file"]) == file_name and g["site"]["line"] == line:
            return g
    return None


def check(name, src_dir, proc, report):
    problems = []
    if report is None:
        return ["no JSON report (exit %d): %s" % (proc.returncode, proc.stderr[-500:])]
    processes = report["processes"]
    source = os.path.join(src_dir, name + ".cu")
    expected = markers(source)
    if name == "vmm_leak":
        m = re.search(r"granularity (\d+) bytes", proc.stdout)
        granularity = int(m.group(1)) if m else None
        for e in expected:
            e["bytes"] = granularity
    else:
        for e in expected:
            e["bytes"] = int(e["bytes"])
    for p in processes:
        if p["events"]["lost"]:
            problems.append("pid %d lost %d events" % (p["pid"], p["events"]["lost"]))
        if p["trace_error"]:
            problems.append("trace error: %s" % p["trace_error"])
    if name == "child_leak":
        if len(processes) != 2:
            problems.append("expected 2 traces (parent and child), got %d" % len(processes))
            return problems
        by_role = {}
        for p in processes:
            role = "child" if any(p2["pid"] == p["parent_pid"] for p2 in processes) else "parent"
            by_role[role] = p
        for e in expected:
            p = by_role.get(e["process"])
            if p is None:
                problems.append("no %s process" % e["process"])
                continue
            g = group_at(p, name + ".cu", e["line"])
            if not g or g["allocations"] != e["count"] or g["bytes"] != e["count"] * e["bytes"]:
                problems.append(
                    "%s: expected %d x %d at line %d, got %s"
                    % (e["process"], e["count"], e["bytes"], e["line"], g and (g["allocations"], g["bytes"]))
                )
            if p["leaks"]["bytes"] != e["count"] * e["bytes"]:
                problems.append(
                    "%s leaked %d bytes in all, expected %d"
                    % (e["process"], p["leaks"]["bytes"], e["count"] * e["bytes"])
                )
        return problems
    if len(processes) != 1:
        problems.append("expected 1 trace, got %d" % len(processes))
        return problems
    p = processes[0]
    total_expected = sum(e["count"] * (e["bytes"] or 0) for e in expected)
    count_expected = sum(e["count"] for e in expected)
    for e in expected:
        g = group_at(p, name + ".cu", e["line"])
        if not g:
            problems.append(
                "nothing reported at %s.cu:%d (groups: %s)"
                % (name, e["line"], [(x["site"]["label"], x["allocations"], x["bytes"]) for x in p["leaks"]["groups"]])
            )
        elif g["allocations"] != e["count"] or g["bytes"] != e["count"] * e["bytes"]:
            problems.append(
                "at line %d expected %d allocations / %d bytes, got %d / %d"
                % (e["line"], e["count"], e["count"] * e["bytes"], g["allocations"], g["bytes"])
            )
    if p["leaks"]["bytes"] != total_expected or p["leaks"]["allocations"] != count_expected:
        problems.append(
            "leaked in all %d bytes in %d allocations, expected %d in %d; groups %s"
            % (
                p["leaks"]["bytes"],
                p["leaks"]["allocations"],
                total_expected,
                count_expected,
                [(x["site"]["label"], x["kind"], x["allocations"], x["bytes"]) for x in p["leaks"]["groups"]],
            )
        )
    if name == "stress":
        if p["events"]["allocations"] != 8 * 100000 + 36:
            problems.append(
                "stress: %d allocations recorded, expected %d" % (p["events"]["allocations"], 8 * 100000 + 36)
            )
        if p["events"]["unmatched_frees"]:
            problems.append("stress: %d unmatched frees" % p["events"]["unmatched_frees"])
    if name == "out_of_memory":
        ooms = p["out_of_memory"]
        if len(ooms) != 1:
            problems.append("expected 1 out-of-memory event, got %d" % len(ooms))
        else:
            o = ooms[0]
            if o["live_bytes"] != 64 << 20:
                problems.append("live at OOM: %d bytes, expected %d" % (o["live_bytes"], 64 << 20))
            if o["site"]["line"] == 0 or not o["site"]["file"].endswith("out_of_memory.cu"):
                problems.append("OOM site not in out_of_memory.cu: %s" % o["site"])
    return problems


def main():
    gpuleak, bin_dir, src_dir, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    results = []
    names = [
        "forgot_free",
        "async_leak",
        "thread_leak",
        "child_leak",
        "pinned_leak",
        "vmm_leak",
        "clean",
        "out_of_memory",
        "stress",
    ]
    for name in names:
        case_dir = os.path.join(out, name)
        os.makedirs(case_dir, exist_ok=True)
        try:
            proc, report, seconds = run_example(gpuleak, os.path.join(bin_dir, name), case_dir)
            problems = check(name, src_dir, proc, report)
            exit_code = proc.returncode
        except Exception as e:  # a crash of the checker must not hide the other cases
            problems, seconds, exit_code = ["checker error: %r" % e], 0, None
        results.append(
            {
                "example": name,
                "pass": not problems,
                "problems": problems,
                "seconds": round(seconds, 2),
                "exit_code": exit_code,
            }
        )
        print(
            "%-14s %-4s %6.1fs %s" % (name, "ok" if not problems else "FAIL", seconds, "; ".join(problems)[:300]),
            flush=True,
        )
    # --fail-on-leak turns a leak into a failing exit code (a CI gate).
    gate_dir = os.path.join(out, "gate")
    gate = subprocess.run(
        [gpuleak, "run", "-q", "--fail-on-leak", "-o", gate_dir, "--", os.path.join(bin_dir, "forgot_free")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    clean_gate = subprocess.run(
        [gpuleak, "run", "-q", "--fail-on-leak", "-o", gate_dir + "-clean", "--", os.path.join(bin_dir, "clean")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    results.append(
        {
            "example": "fail-on-leak gate",
            "pass": gate.returncode == 1 and clean_gate.returncode == 0,
            "problems": []
            if gate.returncode == 1 and clean_gate.returncode == 0
            else ["exit codes %d (leaking) and %d (clean)" % (gate.returncode, clean_gate.returncode)],
        }
    )
    summary = {
        "command": " ".join(sys.argv),
        "passed": sum(r["pass"] for r in results),
        "total": len(results),
        "results": results,
    }
    with open(os.path.join(out, "cuda-examples.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print("cuda examples: %d of %d passed" % (summary["passed"], summary["total"]), flush=True)


if __name__ == "__main__":
    main()
