# gpuleak attach on the GPU (docs/attach.md): jobs started without gpuleak, joined while
# they run, left running. Run as attach:420. For each of a leaking and a clean PyTorch
# job (tests/gpu/attach/train_loop.py) and a leaking and a clean CUDA C++ loop
# (examples/clients: a cudaMalloc per batch never freed; a stream-ordered pool):
#   * the program runs once without gpuleak, then again with `gpuleak attach` in the
#     middle of its run;
#   * the report's verdict, site, holder and keeping line ($R/NAME.report.txt, .json);
#   * the job's own output is the same (per-step losses or checksums) and, for torch,
#     the mean step time after the detach is within 5 % of the same steps without gpuleak.
# Writes summary.json.
G=$D/gpuleak
export GPULEAK_PYTHON_DIR=$D/python
# The allocator hook and the frame reader compiled ahead (as `gpuleak run` does), so the
# safe point does not wait for a compiler inside the job.
PYTHONPATH=$D/python python3 -m gpuleak.torch_hook --build > "$R/hook-build.txt" 2>&1
log "hook build: exit $?"

run_torch() {  # NAME MODE
  local name=$1 mode=$2 steps=1500
  timeout 200 python3 tests/gpu/attach/train_loop.py "$mode" $steps "$R/$name.ready-alone" \
    > "$R/$name.alone.txt" 2> "$R/$name.alone.err"
  echo "exit $?" >> "$R/$name.alone.err"
  python3 tests/gpu/attach/train_loop.py "$mode" $steps "$R/$name.ready" \
    > "$R/$name.attached.txt" 2> "$R/$name.attached.err" &
  local job=$!
  for _ in $(seq 600); do [ -f "$R/$name.ready" ] && break; sleep 0.1; done
  sleep 3
  timeout 120 "$G" attach "$job" --duration 10 -o "$R/$name" --json-report "$R/$name.json" \
    > "$R/$name.report.txt" 2> "$R/$name.attach.err"
  echo "exit $?" >> "$R/$name.attach.err"
  wait $job
  echo "exit $?" >> "$R/$name.attached.err"
  log "$name: $(grep -m1 'Verdict' "$R/$name.report.txt")"
}

run_cuda() {  # NAME PROGRAM
  local name=$1 program=$D/examples/clients/$2 batches=40000
  [ -x "$program" ] || { log "$name: no $program"; return; }
  timeout 200 "$program" $batches > "$R/$name.alone.txt" 2> "$R/$name.alone.err"
  echo "exit $?" >> "$R/$name.alone.err"
  "$program" $batches > "$R/$name.attached.txt" 2> "$R/$name.attached.err" &
  local job=$!
  sleep 3
  timeout 120 "$G" attach "$job" --duration 8 --time-window 0.25 --warmup-steps 2 --min-steps 8 \
    -o "$R/$name" --json-report "$R/$name.json" \
    > "$R/$name.report.txt" 2> "$R/$name.attach.err"
  echo "exit $?" >> "$R/$name.attach.err"
  wait $job
  echo "exit $?" >> "$R/$name.attached.err"
  log "$name: $(grep -m1 'Verdict' "$R/$name.report.txt")"
}

run_torch torch_leak leak
run_torch torch_clean clean
run_cuda cuda_leak leak_scratch_per_batch
run_cuda cuda_clean control_async_pool_per_batch

python3 - "$R" <<'PY'
import json, os, sys
R = sys.argv[1]

def steps(path, key):
    out = []
    for line in open(path):
        for prefix in ("STEP ", "CLIENT_STEP "):
            if line.startswith(prefix):
                out.append(json.loads(line[len(prefix):]))
    return out

def case(name, key, leak_expected, torch):
    result = {"name": name}
    try:
        report = json.load(open(os.path.join(R, name + ".json")))
        [process] = report["processes"]
        growth = process.get("growth") or {}
        result["verdict"] = (process.get("verdict") or {}).get("name")
        result["leak"] = growth.get("verdict") == "LEAK"
        result["sites"] = [s.get("site", {}).get("label") for s in growth.get("sites") or []]
        holder = (growth.get("holder") or {}).get("holder") or {}
        result["holder"] = holder and "%s `%s` (%s)" % (holder.get("type"), holder.get("name"),
                                                      holder.get("owner"))
        result["kept_at"] = holder.get("kept_at")
        result["attach"] = process.get("attach")
    except Exception as error:
        result["error"] = "no report: %s" % error
        result["pass"] = False
        return result
    alone = steps(os.path.join(R, name + ".alone.txt"), key)
    attached = steps(os.path.join(R, name + ".attached.txt"), key)
    result["steps"] = [len(alone), len(attached)]
    result["same_output"] = [s[key] for s in alone] == [s[key] for s in attached]
    ok = result["leak"] == leak_expected and result["same_output"] and len(alone) == len(attached)
    if leak_expected:
        ok = ok and bool(result["sites"])
        if torch:
            ok = ok and bool(result["holder"]) and bool(result["kept_at"])
    if torch and attached:
        # Steps after the detach against the same steps without gpuleak.
        detached = result["attach"] and result["attach"].get("detached")
        tail = slice(-300, None)
        mean = lambda xs: sum(xs) / max(1, len(xs))
        ratio = mean([s["step_ms"] for s in attached[tail]]) / mean([s["step_ms"] for s in alone[tail]])
        result["step_time_after_detach_ratio"] = round(ratio, 3)
        ok = ok and bool(detached) and ratio <= 1.05
    result["pass"] = bool(ok)
    return result

cases = [case("torch_leak", "loss", True, True), case("torch_clean", "loss", False, True),
         case("cuda_leak", "loss", True, False), case("cuda_clean", "loss", False, False)]
summary = {"suite": "attach", "cases": cases, "pass": all(c["pass"] for c in cases)}
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
