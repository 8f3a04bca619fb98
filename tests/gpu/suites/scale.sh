# gpuleak at the scale of real jobs (issue 19), timed on the GPU: run it
# alone (nothing else on the machine while it times), about 400 s:
#     bash tests/gpu/verify.sh scale:500
# 1. The stream-ordered allocation pair from 1, 8 and 48 call sites taking
#    turns through one allocating function: recording over CUPTI callbacks
#    off in the same process, with remembered stacks and without
#    (bench/run_alloc_sites.py). Remembered stacks must not lose to
#    unwinding every stack at any number of sites.
# 2. Training step time of Hugging Face GPT-2 built from a config (no
#    download): 2 layers batch 2 x 128 (launch-bound) and 12 layers batch
#    8 x 512 (GPU-bound), for native, gpuleak run and PyTorch's own
#    _record_memory_history(stacks="python"), in interleaved rounds, with the
#    parts of gpuleak's cost for the tiny model (bench/torch/run_overhead.py:
#    tracker alone, recording without stacks, Python frames, native stacks of
#    backward threads, the rest of `gpuleak run`, memory samples).
#    Targets: tiny <= 1.1x native and below PyTorch's history; 12 layers <= 1.03x.
# 3. The cost `gpuleak run --torch-mode auto` adds to starting a Python
#    program that never uses torch (`print(1)`), hook built beforehand.
timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3

# SCALE_PARTS (default all: sites,steps,startup) and SCALE_STEP_CONFIGS (the
# GPT-2 configurations) narrow a run when device time is short.
parts=${SCALE_PARTS:-sites,steps,startup}
step_configs=${SCALE_STEP_CONFIGS:-native,history,gpuleak_hook,hook_only,tracker_only,hook_no_stacks,hook_python_only,gpuleak_no_sampling,gpuleak_deep_tensor_stacks}
if [[ $parts == *sites* ]]; then
log "scale: allocation pairs from several call sites"
timeout 150 python3 bench/run_alloc_sites.py "$D/bench/alloc_pairs" "$D/lib/libgpuleak_collector.so" \
  "$R/alloc-sites.json" --sites 1,8,48 --processes 3 2>&1 | tail -5

fi
if [[ $parts == *steps* ]]; then
log "scale: GPT-2 step time"
# SCALE_STEP_MODELS adds bench/torch/step_time.py's own loops (mlp: launch-
# bound, transformer: GPU-bound; issue 12's overhead check) to GPT-2, each with
# the configurations SCALE_CONFIG_MODELS allows (SCALE_STEP_CPUS pins every run
# to those cores); the result file is rewritten
# after every round, so a run cut at SCALE_STEP_SECONDS keeps what it measured.
# SCALE_STEP_PER=N times N single steps per process (pauses show as samples).
step_models=${SCALE_STEP_MODELS:-gpt2-tiny,gpt2-12}
config_models=${SCALE_CONFIG_MODELS:-gpt2-12=native+history+gpuleak_hook;mlp=native+history+gpuleak_hook;transformer=native+history+gpuleak_hook}
timeout "${SCALE_STEP_SECONDS:-330}" python3 bench/torch/run_overhead.py "$D/gpuleak" "$R/torch-step-time.json" "${SCALE_STEP_ROUNDS:-3}" \
  --models "$step_models" \
  --configs "$step_configs" \
  --config-models "$config_models" ${SCALE_STEP_CPUS:+--cpus "$SCALE_STEP_CPUS"} \
  ${SCALE_STEP_PER:+--per-step "$SCALE_STEP_PER"} 2>&1 | tail -4

fi
if [[ $parts == *startup* ]]; then
log "scale: start-up of --torch-mode auto"
timeout 60 python3 - "$D/gpuleak" "$R/startup.json" <<'EOF' 2>&1 | tail -3
import json, statistics, subprocess, sys, tempfile, time
gpuleak, out = sys.argv[1], sys.argv[2]
def seconds(argv):
    begin = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    return time.monotonic() - begin
plain, traced = [], []
for _ in range(5):
    plain.append(seconds(["python3", "-c", "print(1)"]))
    traced.append(seconds([gpuleak, "run", "-q", "-o", tempfile.mkdtemp(), "--", "python3", "-c", "print(1)"]))
result = {"what": "wall seconds of python3 -c 'print(1)' alone and under gpuleak run --torch-mode auto (5 each, medians)",
          "plain_s": statistics.median(plain), "gpuleak_run_s": statistics.median(traced),
          "added_s": statistics.median(traced) - statistics.median(plain), "all_plain_s": plain, "all_traced_s": traced}
result["added_under_0.5s"] = result["added_s"] < 0.5
json.dump(result, open(out, "w"), indent=1)
print(json.dumps({k: v for k, v in result.items() if not k.startswith("all")}))
EOF
fi

python3 - "$R" <<'EOF'
import json, os, sys
R = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(R, name)))
    except Exception as error:
        return {"error": "%s: %s" % (name, error)}
sites, torch, startup = load("alloc-sites.json"), load("torch-step-time.json"), load("startup.json")
summary = {
    "what": "issue 19 on the H200: allocation pairs from several call sites (recording over callbacks off, "
            "remembered stacks on and off); GPT-2 step time (per-round ratio to native, interleaved) with the "
            "per-part split of the tiny model's overhead; start-up cost of --torch-mode auto",
    "alloc_sites": {s: {k: v for k, v in r.items() if k != "processes"} for s, r in sites.get("results", {}).items()},
    "remembered_stacks_win": sites.get("remembered_stacks_win"),
    "torch_ratio_to_native": torch.get("median_of_round_ratios"),
    "torch_split_of_the_overhead": torch.get("split_of_the_overhead"),
    "torch_split_in_process": {m: s.get("median") for m, s in (torch.get("in_process_split") or {}).items()},
    "torch_median_step_seconds": torch.get("median_step_seconds"),
    "torch_targets_met": torch.get("targets_met"),
    "startup": {k: v for k, v in startup.items() if not k.startswith("all")},
    "errors": (sites.get("errors") or []) + (torch.get("errors") or []) +
              [v for d in (sites, torch, startup) for k, v in d.items() if k == "error"],
}
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=1)
print("%-10s %-22s %s" % ("part", "measure", "value"))
for s, r in summary["alloc_sites"].items():
    print("%-10s %-22s reuse %s / no reuse %s" % ("sites=" + s, "async rec/off", r.get("reuse_async_ratio"), r.get("no_reuse_async_ratio")))
for m, ratios in (summary["torch_ratio_to_native"] or {}).items():
    for c, v in sorted(ratios.items()):
        print("%-10s %-22s %.3f" % (m, c, v))
print("targets", summary["torch_targets_met"], "startup added", summary["startup"].get("added_s"))
EOF
