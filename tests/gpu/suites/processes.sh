# The process corpus (examples/processes/corpus.json, issue 13): every case
# under gpuleak run, all at once; roles, process findings (none on controls),
# the CUDA-init line, device memory within 10 % of nvidia-smi's per-process
# figure; what a CUDA context costs; what gpuleak doctor saw of DataLoader
# workers (tests/gpu/process_corpus.py). Writes $R/summary.json; keeps the
# traces of three cases in $R/<case>/traces for the CI test of the analysis.
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2
timeout 140 python3 tests/gpu/process_corpus.py --gpuleak "$D/gpuleak" --out "$R" --timeout 100 2>&1 | tail -20
find "$R" -name '*.trace' -size +2M -delete
