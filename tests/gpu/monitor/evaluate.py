"""Turns the raw outputs of tests/gpu/monitor/run.sh into monitor-gpu.json:
the figures and a pass/fail per check. Exit status 0 when every check passed.

usage: python3 evaluate.py OUT_DIR > OUT_DIR/monitor-gpu.json
"""
import json
import os
import sys

MiB = 1 << 20
GiB = 1 << 30
LEAK_FLAG_BOUND_S = 30
CPU_BOUND_PERCENT = 1.0


def load(out_dir, name):
    try:
        with open(os.path.join(out_dir, name)) as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        return {"_missing": f"{name}: {error}"}


def by_pid(items):
    return {item["pid"]: item for item in items if item.get("pid") is not None}


def namespace_note(report):
    others = [f for f in report.get("findings", []) if f["kind"] == "other_namespace"]
    if not others:
        return None
    return (
        f"{len(others)} pid(s) the driver lists are not processes of this PID namespace "
        "(gpuleak runs in a container without the host's PID namespace?)"
    )


def check_nvml(out_dir):
    report = load(out_dir, "monitor-doctor-baseline.json")
    nvml = report.get("nvml", {})
    return {
        "pass": bool(nvml.get("available")),
        "nvml": nvml,
        "devices": [
            {k: d.get(k) for k in ("index", "uuid", "name", "memory_total_bytes", "memory_used_bytes")}
            for d in report.get("devices", [])
        ],
        "baseline_findings": [f["summary"] for f in report.get("findings", [])],
        "error": report.get("_missing"),
    }


def check_dataloader(out_dir):
    pids = load(out_dir, "monitor-dataloader-pids.json")
    report = load(out_dir, "monitor-doctor-dataloader.json")
    if "_missing" in pids or "_missing" in report:
        return {"pass": False, "error": pids.get("_missing") or report.get("_missing")}
    processes, findings = by_pid(report["processes"]), by_pid(report["findings"])
    workers = []
    for pid in pids["workers"]:
        process, finding = processes.get(pid, {}), findings.get(pid, {})
        relation = process.get("relation", {})
        memory = finding.get("memory_bytes")
        ok = (
            finding.get("kind") == "worker_context"
            and relation.get("kind") == "dataloader_worker"
            and relation.get("of_pid") == pids["main"]
            and memory is not None
            and memory >= 100 * MiB
        )
        workers.append(
            {
                "pid": pid,
                "pass": ok,
                "verdict": process.get("verdict"),
                "relation": relation,
                "memory_bytes": memory,
                "device_handles": process.get("device_handles"),
                "summary": finding.get("summary"),
            }
        )
    main = processes.get(pids["main"], {})
    return {
        "pass": len(workers) == 2 and all(w["pass"] for w in workers),
        "main_pid": pids["main"],
        "main_gpu_memory_bytes": main.get("gpu_memory_bytes"),
        "workers": workers,
        "namespace_note": namespace_note(report),
    }


def check_orphan(out_dir):
    pids = load(out_dir, "monitor-orphan-pids.json")
    report = load(out_dir, "monitor-doctor-orphan.json")
    if "_missing" in pids or "_missing" in report:
        return {"pass": False, "error": pids.get("_missing") or report.get("_missing")}
    orphan = pids["orphan"]
    process, finding = by_pid(report["processes"]).get(orphan, {}), by_pid(report["findings"]).get(orphan, {})
    memory = finding.get("memory_bytes")
    ok = (
        process.get("verdict") == "orphan"
        and finding.get("kind") == "orphan"
        and memory is not None
        and memory >= 0.9 * GiB
    )
    return {
        "pass": ok,
        "orphan_pid": orphan,
        "dead_parent_pid": pids["parent"],
        "verdict": process.get("verdict"),
        "memory_bytes": memory,
        "evidence": finding.get("evidence"),
        "summary": finding.get("summary"),
        "namespace_note": namespace_note(report),
    }


def check_top_leak(out_dir):
    leak = load(out_dir, "monitor-leak-pid.json")
    if "_missing" in leak:
        return {"pass": False, "error": leak["_missing"]}
    samples = []
    try:
        with open(os.path.join(out_dir, "monitor-top-leak.jsonl")) as f:
            samples = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as error:
        return {"pass": False, "error": str(error)}
    first_process_flag = first_device_flag = None
    slope_at_flag = None
    for sample in samples:
        process = next((p for p in sample["processes"] if p["pid"] == leak["pid"]), None)
        if first_process_flag is None and process and process.get("gpu_leak"):
            first_process_flag = sample
            slope_at_flag = process.get("gpu_growth_bytes_per_s")
        if first_device_flag is None and any(d.get("leak") for d in sample["devices"]):
            first_device_flag = sample
    result = {"samples": len(samples), "leak_pid": leak["pid"], "leak_bytes_per_s": leak["leak_bytes_per_s"]}
    if first_process_flag is not None:
        result["seconds_from_top_start_to_flag"] = first_process_flag["elapsed_s"]
        result["seconds_from_leak_start_to_flag"] = (
            first_process_flag["time_unix_ms"] / 1000 - leak["leak_started_unix_s"]
        )
        result["slope_bytes_per_s_at_flag"] = slope_at_flag
    if first_device_flag is not None:
        result["device_flag_seconds_from_top_start"] = first_device_flag["elapsed_s"]
    result["pass"] = first_process_flag is not None and first_process_flag["elapsed_s"] <= LEAK_FLAG_BOUND_S
    return result


def check_top_cpu(out_dir):
    cpu = load(out_dir, "monitor-top-cpu.json")
    if "_missing" in cpu:
        return {"pass": False, "error": cpu["_missing"]}
    seconds_cpu = (cpu["cpu_ticks_end"] - cpu["cpu_ticks_start"]) / cpu["clock_ticks_per_s"]
    seconds_wall = cpu["wall_end_s"] - cpu["wall_start_s"]
    percent = 100.0 * seconds_cpu / seconds_wall
    return {
        "pass": percent < CPU_BOUND_PERCENT,
        "cpu_percent_of_one_core": round(percent, 3),
        "cpu_seconds": seconds_cpu,
        "wall_seconds": round(seconds_wall, 2),
        "interval_s": 1.0,
        "bound_percent": CPU_BOUND_PERCENT,
    }


def main():
    out_dir = sys.argv[1]
    checks = {
        "nvml_available": check_nvml(out_dir),
        "doctor_names_dataloader_workers_with_memory": check_dataloader(out_dir),
        "doctor_names_orphan_with_memory": check_orphan(out_dir),
        "top_flags_leak_within_30_s": check_top_leak(out_dir),
        "top_cpu_below_1_percent_at_1_hz": check_top_cpu(out_dir),
    }
    version = ""
    try:
        with open(os.path.join(out_dir, "monitor-gpuleak-version.txt")) as f:
            version = f.read().strip()
    except OSError:
        pass
    result = {"gpuleak_version": version, "all_pass": all(c["pass"] for c in checks.values()), "checks": checks}
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if result["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
