# The labelled PyTorch corpus (examples/torch/corpus.json): verdict, cause,
# holder and site of every case (tests/gpu/torch_corpus.py).
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -3
timeout 200 python3 tests/gpu/torch_corpus.py --gpuleak "$D/gpuleak" --out "$R" 2>&1 | tail -34
# Exit status 1 when a log shows a crash (and names it), 0 otherwise.
! grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|killed by" "$R"/logs/*.log 2>/dev/null
