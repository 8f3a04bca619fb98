#!/usr/bin/env bash
# Second bisection of the SIGABRT under the collector: with the in-process
# holder walk on and off, the allocator hook on and off, and Python's
# faulthandler on so the abort prints every thread's Python stack.
set -u
OUT=${OUT:?}
D=$PWD/dist
export GPULEAK_CACHE_DIR=/tmp/gpuleak-cache PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build > /dev/null 2>&1
run() {  # name, gpuleak run flags...
  local name=$1; shift
  timeout 120 "$D/gpuleak" run -q "$@" -o /tmp/bisect2-$name -- python3 examples/torch/leak_retain_graph_loop.py --steps 120 > "$OUT/$name.log" 2>&1
  echo "$name exit=$?" >> "$OUT/bisect2.txt"
}
run full &
run no_live --no-live &
run hook_off --torch-mode off &
run async --torch-mode async &
wait
sort "$OUT/bisect2.txt"
for f in "$OUT"/*.log; do echo "== $f"; grep -v "^$" "$f" | head -40; done
