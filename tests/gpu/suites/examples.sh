# The CUDA examples: exact bytes, counts and lines of every leak, the clean
# program reports nothing (tests/gpu/check_cuda_examples.py).
timeout 90 python3 tests/gpu/check_cuda_examples.py "$D/gpuleak" "$D/examples" examples/cuda "$R" 2>&1 | tail -15
rm -rf "$R"/stress/traces
