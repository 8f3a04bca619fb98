#!/usr/bin/env bash
# Which part of the collector, if any, goes with the SIGABRT seen once in
# leak_retain_graph_loop.py: the same script under gpuleak run with Python
# stacks (frame reader) on/off and native stacks on/off, twice each, in
# parallel on one GPU. Writes $OUT/bisect.txt.
set -u
OUT=${OUT:?}
D=$PWD/dist
export GPULEAK_CACHE_DIR=/tmp/gpuleak-cache PYTHONUNBUFFERED=1
env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build > /dev/null 2>&1
run() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 "$D/gpuleak" run -q -o /tmp/bisect-$name -- python3 examples/torch/leak_retain_graph_loop.py --steps 120 > /tmp/bisect-$name.log 2>&1
  echo "$name exit=$? $(grep -c 'killed by' /tmp/bisect-$name.log) $(tail -c 300 /tmp/bisect-$name.log | tr '\n' ' ')" >> "$OUT/bisect.txt"
}
for i in 1 2 3; do
  run full$i X=1 &
  run nopython$i GPULEAK_PYTHON_STACKS=0 &
  run nonative$i GPULEAK_NATIVE_DEPTH=0 &
done
wait
for i in 1 2; do run plain$i GPULEAK_DISABLE=1 & done
wait
sort "$OUT/bisect.txt"
