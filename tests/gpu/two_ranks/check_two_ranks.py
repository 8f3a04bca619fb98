"""Runs the 2-rank job under `gpuleak run` and checks the merged report:
one trace per rank, each rank and device shown separately, the leak
reported for the leaking rank only (at the marked line), and NCCL's buffers
shown as non-tensor driver memory (NCCL backend only).

usage: python3 check_two_ranks.py GPULEAK BACKEND OUT_DIR [EXPORTER_PORT]
Writes OUT_DIR/two-ranks.json.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "train_ddp.py")


def marked_line():
    with open(SCRIPT) as f:
        for number, text in enumerate(f, 1):
            if "# LEAK:" in text:
                return number
    return None


def main():
    gpuleak, backend, out = sys.argv[1:4]
    port = sys.argv[4] if len(sys.argv) > 4 else None
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    exporter = None
    scrapes = []
    exporter_command = None
    if port:
        exporter_command = [gpuleak, "exporter", "--listen", "127.0.0.1:" + port, "--interval", "1"]
        exporter = subprocess.Popen(exporter_command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    command = [
        gpuleak,
        "run",
        "-o",
        os.path.join(out, "traces"),
        "--json-report",
        os.path.join(out, "report.json"),
        "--",
        "torchrun",
        "--nproc-per-node",
        "2",
        SCRIPT,
        "--backend",
        backend,
        "--steps",
        "150",
    ]
    started = time.time()
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while job.poll() is None and exporter:
        time.sleep(3)
        try:
            scrapes.append(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5).read().decode())
        except Exception as e:
            scrapes.append("scrape failed: %r" % e)
    stdout, stderr = job.communicate()
    seconds = time.time() - started
    if exporter:
        exporter.terminate()
        exporter.wait(timeout=10)
    with open(os.path.join(out, "stderr.txt"), "w") as f:
        f.write(stderr)
    problems = []
    report = None
    try:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    except Exception as e:
        problems.append("no report: %r (exit %d) %s" % (e, job.returncode, stderr[-800:]))
    ranks = {}
    summary = []
    if report:
        for p in report["processes"]:
            d = p.get("distributed") or {}
            if isinstance(d, dict) and "rank" in d:
                ranks[int(d["rank"])] = p
            summary.append(
                {
                    "pid": p["pid"],
                    "rank": d.get("rank") if isinstance(d, dict) else None,
                    "verdict": p["growth"]["verdict"],
                    "cause": p["growth"]["cause"],
                    "rate_bytes_per_step": p["growth"]["rate_bytes_per_step"],
                    "sites": [s["site"]["label"] for s in p["growth"]["sites"]],
                    "device_memory_by_origin": p["device_memory_by_origin"],
                    "devices": sorted({g["device"] for g in p["leaks"]["groups"] + p["leaks"]["suppressed_groups"]}),
                }
            )
        if sorted(ranks) != [0, 1]:
            problems.append(
                "expected traces for ranks 0 and 1, got ranks %s from %d traces"
                % (sorted(ranks), len(report["processes"]))
            )
        line = marked_line()
        if 1 in ranks:
            g = ranks[1]["growth"]
            if g["verdict"] != "LEAK":
                problems.append("rank 1 verdict %s, expected LEAK" % g["verdict"])
            elif not any(s["site"]["line"] == line and s["site"]["file"].endswith("train_ddp.py") for s in g["sites"]):
                problems.append(
                    "rank 1 leak not at train_ddp.py:%d: %s" % (line, [s["site"]["label"] for s in g["sites"]])
                )
        if 0 in ranks and ranks[0]["growth"]["verdict"] == "LEAK":
            problems.append("rank 0 reported LEAK: %s" % [s["site"]["label"] for s in ranks[0]["growth"]["sites"]])
        if backend == "nccl":
            for r, p in ranks.items():
                if not any(o["origin"] == "NCCL" and not o["tensors"] for o in p["device_memory_by_origin"]):
                    problems.append(
                        "rank %d: no NCCL memory shown as non-tensor (%s)" % (r, p["device_memory_by_origin"])
                    )
        live_lines = [l for l in stderr.splitlines() if re.match(r"gpuleak: \[pid \d+\] LEAK", l)]
        if len(live_lines) != 1:
            problems.append("expected one live LEAK line (rank 1), got %d" % len(live_lines))
    exporter_check = None
    if port:
        # Scrapes run every 3 s while the job runs; the last one usually comes
        # after the ranks ended, so the ranks are looked for in every scrape
        # and the one that shows most processes is kept.
        good = [s for s in scrapes if "gpuleak_" in s]
        rank_pids = {p["pid"]: rank for rank, p in ranks.items()}
        best = max(good, key=lambda s: sum('pid="%d"' % pid in s for pid in rank_pids), default="")
        seen = {pid for pid in rank_pids if any('pid="%d"' % pid in s for s in good)}
        exporter_check = {
            "scrapes": len(scrapes),
            "with_metrics": len(good),
            "gpu_uuids": sorted(set(re.findall(r'UUID="([^"]+)"', best))),
            "rank_pids_seen": sorted(seen),
            "ranks_seen": sorted(rank_pids[pid] for pid in seen),
        }
        if len(exporter_check["gpu_uuids"]) < min(2, len(ranks)) and backend == "nccl":
            problems.append("the exporter did not show both GPUs")
        if len(seen) < len(rank_pids):
            problems.append(
                "the exporter did not show every rank's process (saw %s of %s)" % (sorted(seen), sorted(rank_pids))
            )
        with open(os.path.join(out, "scrape-with-ranks.txt"), "w") as f:
            f.write(best)
        with open(os.path.join(out, "last-scrape.txt"), "w") as f:
            f.write(good[-1] if good else "")
    result = {
        "command": " ".join(command),
        "exporter_command": exporter_command,
        "backend": backend,
        "exit_code": job.returncode,
        "seconds": round(seconds, 1),
        "pass": not problems,
        "problems": problems,
        "processes": summary,
        "exporter": exporter_check,
    }
    with open(os.path.join(out, "two-ranks.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({"pass": result["pass"], "problems": problems, "exporter": exporter_check}), flush=True)


if __name__ == "__main__":
    main()
