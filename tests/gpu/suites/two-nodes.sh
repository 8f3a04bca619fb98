# A 2-node job simulated on one machine: two torchrun "nodes" (--nnodes 2,
# --node-rank 0 and 1, 2 ranks each, gloo on one GPU), each under its own
# `gpuleak run -o $R/node-N` and, where unshare is allowed, in its own UTS
# namespace with its own host name (node-a, node-b). Rank 3 leaks
# (train_ddp.py --leak-rank 3). Then one report over both nodes' folders:
# its RANKS line must name rank 3 on node-b and say ranks 0-2 do not.
# Run as two-nodes:200. Writes $R/report.txt, $R/report.json, summary.json.
port=29533
start_node() {  # node-rank host
  local n=$1 host=$2
  mkdir -p "$R/node-$n"
  local cmd=("$D/gpuleak" run -o "$R/node-$n" -- torchrun --nnodes 2 --node-rank "$n" --nproc-per-node 2
             --master-addr 127.0.0.1 --master-port $port tests/gpu/two_ranks/train_ddp.py
             --backend gloo --steps 150 --leak-rank 3)
  if unshare -u true 2>/dev/null; then
    timeout 150 unshare -u sh -c "hostname $host && exec \"\$@\"" sh "${cmd[@]}" > "$R/node-$n/run.txt" 2>&1 &
  else
    echo "unshare -u not allowed: both nodes keep this machine's host name" >> "$R/notes.txt"
    timeout 150 "${cmd[@]}" > "$R/node-$n/run.txt" 2>&1 &
  fi
}
start_node 0 node-a
start_node 1 node-b
wait
log "nodes done"
timeout 60 "$D/gpuleak" report "$R/node-0" "$R/node-1" > "$R/report.txt" 2> "$R/report.err"
timeout 60 "$D/gpuleak" report --json "$R/node-0" "$R/node-1" > "$R/report.json" 2>> "$R/report.err"
grep -A2 "RANKS:" "$R/report.txt"
python3 - "$R" <<'PY'
import json, os, sys
R = sys.argv[1]
summary = {"suite": "two-nodes"}
try:
    job = json.load(open(os.path.join(R, "report.json")))["job"]
    ranks = job.get("ranks") or {}
    summary["ranks_text"] = ranks.get("text")
    summary["hosts"] = ranks.get("hosts")
    entries = ranks.get("ranks") or []
    leaking = [(e["rank"], e["host"]) for e in entries if e["leak"]]
    summary["leaking"] = leaking
    summary["pass"] = len(entries) == 4 and [r for r, _ in leaking] == [3]
except Exception as error:
    summary.update({"pass": False, "error": str(error)})
if os.path.exists(os.path.join(R, "notes.txt")):
    summary["notes"] = open(os.path.join(R, "notes.txt")).read()
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=1)
print(json.dumps(summary))
PY
find "$R" -name '*.trace' -size +2M -delete
