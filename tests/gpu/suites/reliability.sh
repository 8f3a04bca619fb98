# Lost events on the GPU, end to end: the CUDA stress example (8 threads x
# 100,000 stream-ordered pairs, 36 buffers leaked) under `gpuleak run` with a
# 256 KiB per-thread buffer (GPULEAK_BUFFER_BYTES) while busy processes load
# every CPU, so the collector drops events; then `gpuleak report` on the
# trace: lost events counted with their sequence-number ranges, no damage
# claimed, peak RSS under 1 GiB, the verdict never a clean bill, and
# --fail-on-leak failing. A control runs it with the default buffer: nothing
# lost, exact accounting. tests/gpu/reliability/check_lost_events.py does the
# work and writes $R/summary.json (each check with what it saw).
timeout 280 python3 tests/gpu/reliability/check_lost_events.py \
  --gpuleak "$D/gpuleak" --stress "$D/examples/stress" --out "$R" 2>&1 | tail -30
