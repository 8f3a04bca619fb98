#!/usr/bin/env bash
# `cmake --install` gives a layout that works on its own: installs the build
# into a fresh prefix, moves the build folder's parts out of reach (a copy of
# the prefix to a second place, so no path into the build can be used), and
# runs the installed gpuleak there: --version, a report on a recorded trace,
# and `run` of a Python program that must import the installed package (the
# collector from PREFIX/lib/gpuleak is what `run` injects).
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source_dir=$2
work=$(mktemp -d /tmp/gpuleak-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/first" >/dev/null
# The same tree at another path: nothing may depend on where it was installed.
cp -a "$work/first" "$work/prefix"
rm -rf "$work/first"
p=$work/prefix
fail() { echo "install test: $*"; exit 1; }
[ -x "$p/bin/gpuleak" ] || fail "no bin/gpuleak"
[ -f "$p/lib/gpuleak/libgpuleak_collector.so" ] || fail "no lib/gpuleak/libgpuleak_collector.so"
[ -f "$p/lib/gpuleak/libgpuleak_interposer.so" ] || fail "no lib/gpuleak/libgpuleak_interposer.so"
[ -f "$p/share/gpuleak/python/gpuleak/__init__.py" ] || fail "no share/gpuleak/python/gpuleak"
if ldd "$p/bin/gpuleak" "$p/lib/gpuleak/libgpuleak_collector.so" | grep -F "$build"; then
  fail "an installed file loads a library from the build folder"
fi
if ldd "$p/bin/gpuleak" "$p/lib/gpuleak/libgpuleak_collector.so" | grep 'not found'; then
  fail "an installed file needs a library that is not found"
fi
version=$("$p/bin/gpuleak" --version)
echo "installed: $version"
[ -n "$version" ] || fail "--version printed nothing"
trace=$(ls "$source_dir"/examples/traces/cuda/forgot_free/*.trace | head -1)
"$p/bin/gpuleak" report "$trace" > "$work/report.txt" || true
grep -q 'forgot_free' "$work/report.txt" || { cat "$work/report.txt"; fail "report of $trace does not name forgot_free"; }
cd "$work"
# On a machine without an NVIDIA driver `run` records nothing and says so
# with exit 3 (data missing, docs/cli.md); with a driver the program's own
# exit 0 comes back. Anything else is a failure of the installed layout.
rc=0
out=$(env -u PYTHONPATH -u GPULEAK_COLLECTOR -u GPULEAK_PYTHON_DIR \
  "$p/bin/gpuleak" run -q -o "$work/traces" -- /usr/bin/python3 -c \
  'import gpuleak, os; print("package:", os.path.realpath(gpuleak.__file__)); print("collector:", os.environ.get("CUDA_INJECTION64_PATH", ""))' 2>&1) \
  || rc=$?
echo "$out"
[ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "gpuleak run exited $rc"
echo "$out" | grep -qx "package: $(realpath "$p")/share/gpuleak/python/gpuleak/__init__.py" \
  || fail "the program did not import the installed Python package"
echo "$out" | grep -q "collector: $(realpath "$p")/lib/gpuleak/libgpuleak_collector.so" \
  || fail "gpuleak run did not inject the installed collector"
echo "install test: passed ($p)"
