# gpuleak.track(), the pytest plugin and the IPython magic on the GPU, from the wheel
# (dist/wheel, scripts/package) installed into a venv there with the machine's torch.
# Run as in_process:240. Writes $R/{track,pytest,ipython}.txt and summary.json.
wheel=$(ls "$D"/wheel/gpuleak-*-py3-none-linux_x86_64.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo '{"pass": false, "error": "no wheel in dist/wheel"}' > "$R/summary.json"; exit 1; }
# The machine's python3 is itself a venv (/opt/torch/.venv): --system-site-packages
# would reach its base interpreter, not torch and pytest, so a .pth file puts the
# machine's site-packages behind the new venv's own (the wheel comes first).
python3 -m venv "$R/venv" && "$R/venv/bin/pip" install --no-index -q "$wheel" > "$R/pip.txt" 2>&1
machine_site=$(python3 -c 'import site, sysconfig; print("\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]] + site.getsitepackages())))')
venv_site=$("$R/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$machine_site" > "$venv_site/zz_machine_site.pth"
log "wheel installed: $(tail -1 "$R/pip.txt")"
PY=$R/venv/bin/python
cd tests/gpu/in_process
timeout 120 "$PY" track_programs.py > "$R/track.txt" 2> "$R/track.err"
echo "exit $?" >> "$R/track.err"
log "track: $(grep -c '"verdict"' "$R/track.txt") blocks"
# The plugin comes from the wheel's pytest11 entry point (no -p).
timeout 200 "$PY" -m pytest -p no:cacheprovider -rA --gpuleak test_gpu_models.py > "$R/pytest.txt" 2>&1
echo "exit $?" >> "$R/pytest.txt"
log "pytest: $(tail -3 "$R/pytest.txt" | head -1)"
# IPython, when the bundle carries it (dist/ipython: Debian's pure-Python packages).
if [ -d "$D/ipython" ]; then
  PYTHONPATH=$D/ipython timeout 100 "$PY" ipython_magic.py > "$R/ipython.txt" 2>&1
  echo "exit $?" >> "$R/ipython.txt"
fi
cd - > /dev/null
python3 - "$R" <<'PY'
import json, os, re, sys
R = sys.argv[1]
blocks = {}
for line in open(os.path.join(R, "track.txt")):
    if line.startswith("{"):
        b = json.loads(line)
        blocks[b["block"]] = b
text = open(os.path.join(R, "pytest.txt")).read()
outcomes = dict((m.group(2), m.group(1)) for m in re.finditer(r"^(PASSED|FAILED) \S+::(\w+)", text, re.M))
expected = {"test_leaks_outputs_into_a_global_list": "FAILED", "test_clean_inference": "PASSED",
            "test_clean_training_step": "PASSED", "test_loss_kept_every_repetition": "FAILED",
            "test_loss_item_every_repetition": "PASSED", "test_peaks_above_its_limit": "FAILED"}
ipython = open(os.path.join(R, "ipython.txt")).read() if os.path.exists(os.path.join(R, "ipython.txt")) else None
summary = {"suite": "in_process",
           "track_leak": blocks.get("leak", {}).get("verdict"),
           "track_leak_keeping_line": blocks.get("leak", {}).get("keeping_line"),
           "track_clean": blocks.get("clean", {}).get("verdict"),
           "pytest_outcomes": outcomes,
           "pytest_as_expected": outcomes == expected,
           "ipython": None if ipython is None else ("VERDICT left behind" in ipython)}
summary["pass"] = (summary["track_leak"] == "leak" and summary["track_clean"] == "clean"
                   and "total_loss +=" in (summary["track_leak_keeping_line"] or "")
                   and summary["pytest_as_expected"] and summary["ipython"] is not False)
json.dump(summary, open(os.path.join(R, "summary.json"), "w"), indent=1)
print(json.dumps(summary))
PY
rm -rf "$R/venv"
