#!/usr/bin/env bash
# The wheel works on its own: scripts/package builds it from the build
# folder, it is installed into a fresh venv with no index and no access to
# the tree (pip --no-index; everything it runs is copied out first), and the
# installed `gpuleak` reports on a trace, lints a file and runs a Python
# program whose traced process imports the wheel's own copy of the package;
# `import gpuleak` works in the venv; nothing it loads comes from the tree.
#   wheel_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/gpuleak-wheel-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "wheel test: $*"; exit 1; }
(cd "$source_dir" && scripts/package "$build") > "$work/package.txt" 2>&1 || { cat "$work/package.txt"; fail "scripts/package failed"; }
wheel=$(ls "$source_dir"/dist/wheel/gpuleak-*-py3-none-linux_x86_64.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || fail "no py3-none-linux_x86_64 wheel in dist/wheel"
size=$(stat -c %s "$wheel")
echo "wheel: $(basename "$wheel"), $((size / 1024)) KiB"
[ "$size" -lt $((64 * 1024 * 1024)) ] || fail "the wheel is over 64 MiB: not stripped?"
cp "$wheel" "$work/"
cp "$(ls "$source_dir"/examples/traces/cuda/forgot_free/*.trace | head -1)" "$work/forgot_free.trace"
cp "$source_dir/examples/torch/leak_eval_total_loss.py" "$work/eval.py"
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --no-index --no-cache-dir -q "$work/$(basename "$wheel")" || fail "pip install failed"
cd "$work"
# Only the venv and the system on PATH; no PYTHONPATH, no GPULEAK_* from the tree.
run() { env -i PATH="$work/venv/bin:/usr/bin:/bin" HOME="$work" "$@"; }
native=$(run python -c "import gpuleak._command as c; print(c.native_dir())")
case "$native" in "$work"/venv/*) ;; *) fail "the package is not the venv's: $native" ;; esac
if ldd "$native/gpuleak" "$native/lib/libgpuleak_collector.so" | grep -E "not found|$build|$source_dir"; then
  fail "an installed file needs a library that is missing or in the tree"
fi
version=$(run gpuleak --version) || fail "gpuleak --version failed"
echo "installed gpuleak $version"
run gpuleak report forgot_free.trace > report.txt || true
grep -q "LEAKED" report.txt || { cat report.txt; fail "the report does not say LEAKED"; }
rc=0; run gpuleak lint eval.py > lint.txt || rc=$?
[ "$rc" = 1 ] && grep -q "GL102" lint.txt || { cat lint.txt; fail "lint found no GL102 (exit $rc)"; }
run python -c "import gpuleak" || fail "import gpuleak failed in the venv"
# `run`: the traced program starts the wheel's boot and imports the wheel's
# copy of the package (the folder holding only it); without a driver
# nothing is recorded (exit 3).
rc=0
run gpuleak run -o traces -- python -c "import gpuleak, sys; print('traced', gpuleak.__file__); print('boot', sys.modules['sitecustomize'].__file__)" > run.txt 2>&1 || rc=$?
grep -q "traced $native/python/gpuleak/__init__.py" run.txt || { cat run.txt; fail "the traced program did not import the wheel's package"; }
# The boot (sitecustomize) that starts gpuleak's Python side came with the wheel.
grep -q "boot $native/python/boot/sitecustomize.py" run.txt || { cat run.txt; fail "the traced program did not start the wheel's boot"; }
[ "$rc" = 0 ] || [ "$rc" = 3 ] || { cat run.txt; fail "gpuleak run exited $rc"; }
echo "1 passed, 0 failed"
