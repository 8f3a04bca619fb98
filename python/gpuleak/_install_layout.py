"""Where this installation keeps its native parts: the CLI and the collector.

The same places src/cli/install_layout.cpp looks in, seen from the package:
  * a wheel: gpuleak/_native/gpuleak and gpuleak/_native/lib/ (scripts/package);
  * `cmake --install`: P/share/gpuleak/python/gpuleak, P/bin/gpuleak,
    P/lib/gpuleak/libgpuleak_collector.so;
  * a checkout: python/gpuleak (or build/python/gpuleak) with the build in
    build/ (scripts/setup).
GPULEAK_BINARY and GPULEAK_COLLECTOR, when set, win.
"""

import os

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    native = os.path.join(_PACKAGE_DIR, "_native")
    yield os.path.join(native, "gpuleak"), os.path.join(native, "lib", "libgpuleak_collector.so")
    python_dir = os.path.dirname(_PACKAGE_DIR)
    prefix = os.path.dirname(os.path.dirname(python_dir))  # P of P/share/gpuleak/python
    yield (os.path.join(prefix, "bin", "gpuleak"), os.path.join(prefix, "lib", "gpuleak", "libgpuleak_collector.so"))
    checkout = os.path.dirname(python_dir)  # python/ or build/python/ of a checkout
    for build in (os.path.join(checkout, "build"), checkout):
        yield os.path.join(build, "gpuleak"), os.path.join(build, "libgpuleak_collector.so")


def native_parts():
    """(cli, collector): paths of the gpuleak binary and the collector library; either may be
    None when this installation has none (a source checkout that was never built)."""
    cli = os.environ.get("GPULEAK_BINARY") or None
    collector = os.environ.get("GPULEAK_COLLECTOR") or None
    for candidate_cli, candidate_collector in _candidates():
        if cli is None and os.access(candidate_cli, os.X_OK) and os.path.isfile(candidate_cli):
            cli = candidate_cli
        if collector is None and os.path.isfile(candidate_collector):
            collector = candidate_collector
    return cli, collector
