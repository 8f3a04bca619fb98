#!/usr/bin/env bash
# Packs a relocatable copy of the build for the GPU machine (which has no
# package registry): binaries with their non-system shared libraries next to
# them (rpath $ORIGIN), the CUDA examples, the benchmarks and the Python
# package. Output: ./dist (git-ignored; pass it to the device tool's carry).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf dist
mkdir -p dist/lib dist/examples dist/bench
# The CLI's own debug info is large and not needed there (the examples keep theirs).
[ -f "$build/gpuleak" ] && cp "$build/gpuleak" dist/ && strip --strip-debug dist/gpuleak
cp "$build/libgpuleak_collector.so" dist/lib/
cp "$build/libgpuleak_interposer.so" dist/lib/ 2>/dev/null || true
mkdir -p dist/examples/clients && cp "$build"/examples/clients/* dist/examples/clients/ 2>/dev/null || true
cp "$build"/examples/* dist/examples/ 2>/dev/null || true
cp "$build"/bench/alloc_pairs dist/bench/ 2>/dev/null || true
cp -r python dist/python
binaries=(dist/lib/libgpuleak_collector.so)
[ -f dist/gpuleak ] && binaries+=(dist/gpuleak)
# Every shared library they need except the C/C++ runtime, which the GPU
# machine has (newer); two copies of libstdc++ in one process would clash.
for lib in $(ldd "${binaries[@]}" | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
    *) cp -L "$lib" dist/lib/ ;;
  esac
done
# A RUNPATH serves only its own object's direct needs: the copied libraries
# look for theirs (libgrpc++ for libgrpc) next to themselves too.
if command -v patchelf > /dev/null; then
  for lib in dist/lib/*.so*; do
    case "$(basename "$lib")" in libgpuleak_*) ;; *) patchelf --set-rpath '$ORIGIN' "$lib" ;; esac
  done
fi
# IPython for the %%gpuleak magic's GPU check (tests/gpu/suites/in_process.sh): the GPU
# machine has no IPython and no registry; Debian's pure-Python packages load there.
mkdir -p dist/ipython
for module in IPython traitlets prompt_toolkit decorator.py parso pexpect stack_data \
    executing asttokens pure_eval matplotlib_inline wcwidth backcall pickleshare.py ptyprocess; do  # (jedi: optional, 12 MiB)
  [ -e "/usr/lib/python3/dist-packages/$module" ] && cp -r "/usr/lib/python3/dist-packages/$module" dist/ipython/
done
git rev-parse --short HEAD > dist/COMMIT 2>/dev/null || true
# Uncommitted changes in the bundle are said, so results name what ran.
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && sed -i "s/$/+changes/" dist/COMMIT
du -sh dist
