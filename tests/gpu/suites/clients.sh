# The client matrix (issue 14): gpuleak on Lightning (one process; two on one
# GPU), HF Trainer, accelerate, torch.compile default and reduce-overhead,
# torchrun (2 ranks, one GPU), torch.profiler, JAX (preallocating and
# platform allocator), CuPy and a plain CUDA C++ program -- a planted leak
# and a control each (examples/clients/clients.json). Verdict runs go six at
# a time; the timing runs (without and with gpuleak, 60 steps) one at a time.
# Writes $R/summary.json (tests/gpu/client_matrix.py explains every field)
# and prints the table. Needs about 270 s: run as clients:330.
log "clients: python $(python3 -c 'import sys; print(sys.version.split()[0])'), torch $(python3 -c 'import torch; print(torch.__version__)' 2>&1 | tail -1), lightning $(python3 -c 'import lightning; print(lightning.__version__)' 2>&1 | tail -1), transformers $(python3 -c 'import transformers; print(transformers.__version__)' 2>&1 | tail -1), jax $(python3 -c 'import jax; print(jax.__version__)' 2>&1 | tail -1), cupy $(python3 -c 'import cupy; print(cupy.__version__)' 2>&1 | tail -1)"
timeout 60 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build 2>&1 | tail -2
timeout 320 python3 tests/gpu/client_matrix.py --gpuleak "$D/gpuleak" --programs "$D/examples/clients" \
  --out "$R" --jobs 6 --timeout 150 --timing-steps 60 2>&1 | tail -40
grep -l -E "corrupted|Segmentation fault|Aborted|core dumped|internal error|collector disabled" "$R"/*/log.txt 2>/dev/null | sed 's/^/collector trouble in: /'
true
