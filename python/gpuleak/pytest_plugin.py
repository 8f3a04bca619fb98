"""pytest plugin: GPU memory a test left behind, and tests whose memory grows when run again.

Installed with the wheel (entry point `pytest11`); from a checkout, `-p gpuleak.pytest_plugin`.

  pytest --gpuleak                     every test tracked; the summary lists those that left
                                       GPU memory allocated or leaked
  @pytest.mark.gpuleak_limit_leaks("1 MiB")
                                       fails the test when it leaves more than that allocated
                                       at its end (or its memory grows when repeated)
  @pytest.mark.gpuleak_limit_memory("2 GiB")
                                       fails the test when its own allocations peak above that
  @pytest.mark.gpuleak_repeat(12)      runs the test body 12 times (a step each) and fails on
  pytest --gpuleak-repeat 12           growth per repetition: the leak that shows only when
                                       code runs again

Each tracked test's call is one gpuleak.track() block (gpuleak/tracking.py): fixtures are set
up before it and torn down after it, so memory a fixture holds is not the test's. A failure
names the line that allocated, what holds the memory and the statement that keeps it. Under
pytest-xdist each worker tracks its own tests; the summary comes from their reports.
"""

import json

import pytest

_RESULT_KEY = "gpuleak"  # the user property that carries a test's result to the summary
DEFAULT_REPEATS = 12


def pytest_addoption(parser):
    group = parser.getgroup("gpuleak", "GPU memory leaks (gpuleak)")
    group.addoption(
        "--gpuleak",
        action="store_true",
        default=False,
        help="track every test's GPU memory; list the tests that left memory " "allocated or leaked",
    )
    group.addoption(
        "--gpuleak-repeat",
        type=int,
        default=0,
        metavar="N",
        help="run each tracked test's body N times and fail on growth per " "repetition (N >= 10)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpuleak_limit_leaks(size): fail when the test leaves more than `size` "
        '("1 MiB") of GPU memory allocated at its end, or its memory grows',
    )
    config.addinivalue_line(
        "markers",
        "gpuleak_limit_memory(size): fail when the GPU memory the test allocates " 'peaks above `size` ("2 GiB")',
    )
    config.addinivalue_line(
        "markers",
        "gpuleak_repeat(n=12): run the test body n times, one step each, and fail " "on growth per repetition",
    )


class _Limits:
    """What one test asks for, read from its markers and the command line."""

    def __init__(self, item):
        from gpuleak._quantities import parse_size

        self.leaks = self.memory = None
        self.repeats = 0
        self.asked = bool(item.config.getoption("gpuleak") or item.config.getoption("gpuleak_repeat"))
        for name, attribute in (("gpuleak_limit_leaks", "leaks"), ("gpuleak_limit_memory", "memory")):
            marker = item.get_closest_marker(name)
            if marker is None:
                continue
            self.asked = True
            if len(marker.args) != 1 or marker.kwargs:
                raise ValueError('@pytest.mark.%s takes one size, such as "1 MiB"' % name)
            try:
                setattr(self, attribute, parse_size(marker.args[0]))
            except ValueError as error:
                raise ValueError("@pytest.mark.%s(%r): %s" % (name, marker.args[0], error))
        marker = item.get_closest_marker("gpuleak_repeat")
        repeats = item.config.getoption("gpuleak_repeat") or 0
        if marker is not None:
            self.asked = True
            repeats = marker.args[0] if marker.args else marker.kwargs.get("n", DEFAULT_REPEATS)
        if repeats:
            if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 10:
                raise ValueError(
                    "gpuleak_repeat needs at least 10 repetitions (got %r): growth "
                    "is judged over 8 after 2 of warm-up" % (repeats,)
                )
            self.repeats = repeats


def _repeated(function, repeats):
    """The test function, run `repeats` times with a step after each."""
    import functools

    import gpuleak

    @functools.wraps(function)
    def run_repeatedly(*args, **kwargs):
        for _ in range(repeats):
            function(*args, **kwargs)
            gpuleak.step()

    return run_repeatedly


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    try:
        limits = _Limits(pyfuncitem)
    except ValueError as error:
        # A marker that cannot be read fails this test, by name, and runs nothing.
        pyfuncitem.obj = _fails_with("%s: %s" % (pyfuncitem.nodeid, error))
        yield
        return
    if not limits.asked:
        yield
        return
    from gpuleak import tracking

    original = pyfuncitem.obj
    if limits.repeats:
        pyfuncitem.obj = _repeated(original, limits.repeats)
    block = tracking.track(pyfuncitem.nodeid)
    block.start()
    try:
        outcome = yield
    finally:
        pyfuncitem.obj = original
        try:
            result = block.stop()
        except Exception as error:
            result = tracking.TrackResult.not_tracked(pyfuncitem.nodeid, "no report: %s" % error)
    pyfuncitem.user_properties.append((_RESULT_KEY, json.dumps(_summary_of(result))))
    if outcome.excinfo is not None:
        return  # the test's own failure comes first
    problem = _over_the_limits(result, limits)
    if problem:
        pytest.fail("%s\n%s" % (problem, result.summary()), pytrace=False)


def _fails_with(message):
    def fail(*args, **kwargs):
        pytest.fail(message, pytrace=False)

    return fail


def _over_the_limits(result, limits):
    from gpuleak._quantities import format_bytes

    if not result.tracked:
        return None
    if limits.leaks is not None or limits.repeats:
        if result.leak:
            return "GPU memory grew by %s per repetition over %d repetitions" % (
                format_bytes(result.growth_bytes_per_step),
                result.steps,
            )
    if limits.leaks is not None and result.left_behind_bytes > limits.leaks:
        return "the test left %s of GPU memory allocated (limit %s)" % (
            format_bytes(result.left_behind_bytes),
            format_bytes(limits.leaks),
        )
    if limits.memory is not None and result.peak_bytes > limits.memory:
        return "the test's GPU memory peaked at %s (limit %s)" % (
            format_bytes(result.peak_bytes),
            format_bytes(limits.memory),
        )
    return None


def _summary_of(result):
    return {
        "verdict": result.verdict,
        "left_behind_bytes": result.left_behind_bytes,
        "growth_bytes_per_step": result.growth_bytes_per_step,
        "peak_bytes": result.peak_bytes,
        "summary": result.summary(),
    }


def pytest_terminal_summary(terminalreporter):
    from gpuleak._quantities import format_bytes

    found = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for key, value in getattr(report, "user_properties", ()):
                if key == _RESULT_KEY:
                    found.append((report.nodeid, json.loads(value)))
    if not found:
        return
    kept = [(nodeid, r) for nodeid, r in found if r["verdict"] in ("leak", "left behind")]
    not_tracked = [(nodeid, r) for nodeid, r in found if r["verdict"] == "not tracked"]
    terminalreporter.section("gpuleak: GPU memory per test")
    terminalreporter.write_line(
        "%d tests tracked, %d left GPU memory allocated or leaked%s"
        % (len(found), len(kept), ", %d not tracked" % len(not_tracked) if not_tracked else "")
    )
    for nodeid, r in sorted(kept, key=lambda entry: -entry[1]["left_behind_bytes"]):
        if r["verdict"] == "leak":
            what = "LEAK +%s/repetition" % format_bytes(r["growth_bytes_per_step"])
        else:
            what = "left %s" % format_bytes(r["left_behind_bytes"])
        terminalreporter.write_line("  %s: %s" % (nodeid, what))
        for line in r["summary"].splitlines()[1:4]:
            terminalreporter.write_line("    " + line.strip())
    if not_tracked:
        terminalreporter.write_line("  not tracked: " + not_tracked[0][1]["summary"])
