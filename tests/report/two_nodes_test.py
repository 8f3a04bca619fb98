#!/usr/bin/env python3
"""One report over the trace folders of a 2-node job, recorded on the GPU
(tests/gpu/suites/two-nodes.sh: torchrun --nnodes 2, 2 ranks per node, each
node in its own UTS namespace named node-a and node-b, rank 3 leaking): the
RANKS line names rank 3 on node-b and says ranks 0-2 do not; the JSON has
the same in job.ranks.

Usage: two_nodes_test.py --gpuleak BUILD/gpuleak
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = [os.path.join(ROOT, "examples", "traces", "two_nodes", "node-%d" % n) for n in (0, 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuleak", required=True)
    a = ap.parse_args()
    failures = []
    text = subprocess.run([a.gpuleak, "report", *NODES], capture_output=True, text=True, timeout=120).stdout
    line = next((l.strip() for l in text.splitlines() if l.strip().startswith("RANKS:")), "")
    print(line)
    if not (
        "4 ranks on 2 hosts (node-a: 0, 1; node-b: 2, 3)" in line
        and "rank 3 on node-b" in line
        and "ranks 0-2 do not" in line
    ):
        failures.append("the RANKS line does not name rank 3 on node-b: %r" % line)
    report = json.loads(
        subprocess.run([a.gpuleak, "report", "--json", *NODES], capture_output=True, text=True, timeout=120).stdout
    )
    ranks = report["job"]["ranks"]
    leaking = [(e["rank"], e["host"]) for e in ranks["ranks"] if e["leak"]]
    if leaking != [(3, "node-b")] or ranks["hosts"] != ["node-a", "node-b"]:
        failures.append("job.ranks: leaking %s, hosts %s" % (leaking, ranks["hosts"]))
    if any(e["launcher"] != "torchrun" for e in ranks["ranks"]):
        failures.append("launchers: %s" % [e["launcher"] for e in ranks["ranks"]])
    for f in failures:
        print("FAIL", f)
    print("%d passed, %d failed" % (0 if failures else 1, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
