# The wheel on the GPU machine (another distribution, Python 3.12): made by
# scripts/package here and carried in dist/wheel/, installed into a venv
# there (pip --no-index; --system-site-packages for the machine's torch),
# then `gpuleak run` from that venv on a leaking and a clean PyTorch script.
# Run as wheel:200. Writes $R/{leak,clean,nocc}.txt and summary.json.
wheel=$(ls "$D"/wheel/gpuleak-*-py3-none-linux_x86_64.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo '{"pass": false, "error": "no wheel in dist/wheel"}' > "$R/summary.json"; exit 1; }
python3 -m venv --system-site-packages "$R/venv" && "$R/venv/bin/pip" install --no-index -q "$wheel" > "$R/pip.txt" 2>&1
log "wheel installed: $(tail -1 "$R/pip.txt")"
G=$R/venv/bin/gpuleak
timeout 80 "$G" run -o "$R/leak-traces" -- python3 examples/torch/leak_eval_total_loss.py --steps 80 > "$R/leak.txt" 2>&1
echo "exit $?" >> "$R/leak.txt"
timeout 80 "$G" run -o "$R/clean-traces" -- python3 examples/torch/control_replay_buffer.py > "$R/clean.txt" 2>&1
echo "exit $?" >> "$R/clean.txt"
# Nothing to compile: no compiler at all and an empty cache. The frame reader
# shipped for this Python serves; the allocator hook cannot be built, so
# gpuleak says so once and tracks tensors through the async backend.
mkdir -p "$R/empty-cache"
CC=/bin/false CXX=/bin/false GPULEAK_CACHE_DIR=$R/empty-cache timeout 80 "$G" run -o "$R/nocc-traces" -- \
  python3 examples/torch/leak_eval_total_loss.py --steps 80 > "$R/nocc.txt" 2>&1
echo "exit $?" >> "$R/nocc.txt"
ls -la "$R/empty-cache" > "$R/nocc-cache.txt" 2>&1
tail -n 4 "$R/leak.txt" "$R/clean.txt" "$R/nocc.txt"
python3 - "$R" <<'PY'
import json, os, re, sys
R = sys.argv[1]
def verdict(name):
    text = open(os.path.join(R, name)).read()
    m = re.search(r"Verdict: (LEAKED|LEAK|NO LEAK|NOT YET|INCOMPLETE)", text)
    return m.group(1) if m else None
summary = {"suite": "wheel", "leak_verdict": verdict("leak.txt"), "clean_verdict": verdict("clean.txt"),
           "no_compiler_verdict": verdict("nocc.txt")}
nocc = open(os.path.join(R, "nocc.txt")).read()
# The keeping statement named without any compiler (Python lines need the shipped reader).
summary["no_compiler_keeping_line"] = "total_loss += loss" in nocc
summary["no_compiler_compiled"] = sorted(f for f in os.listdir(os.path.join(R, "empty-cache")) if f.endswith(".so"))
summary["pass"] = (summary["leak_verdict"] == "LEAK" and summary["clean_verdict"] == "NO LEAK"
                   and summary["no_compiler_verdict"] == "LEAK" and summary["no_compiler_keeping_line"]
                   and not summary["no_compiler_compiled"])
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=1)
print(json.dumps(summary))
PY
rm -rf "$R/venv" "$R"/*-traces
