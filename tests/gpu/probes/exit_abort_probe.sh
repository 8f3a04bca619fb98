# Runs one loops-corpus case several times under gpuleak run, with backward
# blocks named by their autograd node (default) and with the node not asked
# (GPULEAK_BACKWARD_NATIVE_STACKS=1), and counts how many runs ended by a
# signal: for an abort at exit ("terminate called without an active
# exception") seen once in the loops suite.
#     PROBE_CASE=leak_custom_optimizer_create_graph PROBE_RUNS=3 bash tests/gpu/probes/exit_abort_probe.sh
set -u
D=${D:-$PWD/dist}
OUT=${OUT:?set OUT}
case_name=${PROBE_CASE:-leak_custom_optimizer_create_graph}
runs=${PROBE_RUNS:-3}
export GPULEAK_CACHE_DIR=/tmp/gpuleak-cache
timeout 120 env PYTHONPATH="$D/python" python3 -m gpuleak.torch_hook --build > "$OUT/build.txt" 2>&1
one() {
  local mode=$1 i=$2 log="$OUT/$1-$2.log"
  env GPULEAK_BACKWARD_NATIVE_STACKS=$mode timeout 120 "$D/gpuleak" run -q -o "/tmp/probe-$mode-$i" -- \
    python3 "examples/loops/$case_name.py" --iterations 120 > "$log" 2>&1
  echo "mode=$mode run=$i exit=$? $(grep -c 'terminate called' "$log") terminate line(s)" >> "$OUT/probe.txt"
}
for i in $(seq 1 "$runs"); do
  one 0 "$i" &
  one 1 "$i" &
done
wait
sort "$OUT/probe.txt"
