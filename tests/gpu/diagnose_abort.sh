#!/usr/bin/env bash
# Why leak_retain_graph_loop.py died of SIGABRT under the collector (part C,
# bisect.txt: every collector configuration, never without it). Runs it in
# parallel under: the full default setup with a native backtrace at the
# fatal signal (tests/gpu/crash_backtrace.c) and Python's faulthandler (every
# thread's Python stack); without live analysis (so no holder walks); with
# the allocator hook off; with the cudaMallocAsync backend. Writes
# $OUT/diagnose-abort/{summary.txt,<config>.log}.
set -u
OUT=${OUT:?}
D=$PWD/dist
R=$OUT/diagnose-abort
mkdir -p "$R"
export GPULEAK_CACHE_DIR=/tmp/gpuleak-cache PYTHONUNBUFFERED=1
env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build > /dev/null 2>&1
BT=/tmp/crash_backtrace.so
cc -shared -fPIC -O1 -o "$BT" tests/gpu/crash_backtrace.c 2>/dev/null || BT=$D/diag/crash_backtrace.so
run() {  # name, env assignments..., -- gpuleak run flags...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 150 "$D/gpuleak" run "$@" -o "/tmp/diagnose-$name" -- \
    python3 examples/torch/leak_retain_graph_loop.py --steps 120 > "$R/$name.log" 2>&1
  echo "$name exit=$? $(grep -c 'LEAK' "$R/$name.log") LEAK lines" >> "$R/summary.txt"
}
run backtrace LD_PRELOAD="$BT" PYTHONFAULTHANDLER=1 -- &
run no_live LD_PRELOAD="$BT" PYTHONFAULTHANDLER=1 -- --no-live &
run hook_off PYTHONFAULTHANDLER=1 -- --torch-mode off &
run async PYTHONFAULTHANDLER=1 -- --torch-mode async &
run plain GPULEAK_DISABLE=1 -- &
wait
sort "$R/summary.txt"
