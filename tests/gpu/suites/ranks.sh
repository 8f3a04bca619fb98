# Two ranks under `gpuleak run -- torchrun` (tests/gpu/two_ranks/): one trace
# per rank, the leak planted in rank 1 reported for rank 1 only, NCCL's
# buffers shown as non-tensor memory, both ranks in the exporter's /metrics.
# BACKEND=nccl (the default) needs two GPUs (kind nvidia-h200-x2); BACKEND=gloo
# runs both ranks on one GPU. Writes $R/two-ranks.json (the baseline
# bench/baselines/gpu/two-ranks-nccl.json came from this,
# two-ranks-gloo.json from BACKEND=gloo) and
# summary.json. Run as ranks:120.
backend=${BACKEND:-nccl}
timeout 110 python3 tests/gpu/two_ranks/check_two_ranks.py "$D/gpuleak" "$backend" "$R/two-ranks-$backend" 10417 2>&1 | tail -20
python3 - "$R" "$backend" <<'PY'
import json, sys
r, backend = sys.argv[1:3]
try:
    result = json.load(open("%s/two-ranks-%s/two-ranks.json" % (r, backend)))
    summary = {"backend": backend, "pass": bool(result.get("pass")), "problems": result.get("problems")}
except Exception as error:
    summary = {"backend": backend, "pass": False, "error": str(error)}
json.dump(summary, open(r + "/summary.json", "w"), indent=1)
print(json.dumps(summary))
PY
rm -rf "$R"/two-ranks-*/traces
