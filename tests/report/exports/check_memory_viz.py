#!/usr/bin/env python3
"""Opens a `gpuleak report --format memory_viz` pickle with PyTorch's own
torch.cuda._memory_viz functions, the code behind pytorch.org/memory_viz.

    check_memory_viz.py FILE [--expect-frame S] [--expect-top-frame S]
                             [--expect-device-trace-actions a,b,...]

The file is the torch >= 2.1 snapshot dict {'segments': [...],
'device_traces': [[...], ...]}. torch 1.13 (Debian's) reads only a list of
segments, which is what its memory_snapshot() returned, so it is given
snapshot['segments']; torch 2.x is given the dict. Every flame graph is
rendered through a format_flamegraph that returns the folded lines, so
nothing downloads flamegraph.pl.

--expect-top-frame: the leaf of torch's own `memory` flame lines, summed per
leaf over lines of state active_allocated; the leaf with the most bytes wins.

Exit 0: torch accepted the file and every expectation holds; 1: it did not;
77: torch is not installed.
"""
import argparse
import base64
import collections
import contextlib
import io
import pickle
import re
import sys
import traceback

SKIP = 77
# Leaves torch writes for blocks without a usable stack; never a real frame.
PSEUDO_LEAVES = {"<gaps>", "<non-python>", "<no-context>"}


class Rejected(Exception):
    """The consumer refused the file, or an expectation does not hold."""


def folded_text(lines):
    # Stands in for flamegraph.pl: torch hands it the folded lines.
    return lines


def parse_folded(text):
    """Folded lines 'a;b;c BYTES' -> list of (path list, bytes)."""
    rows = []
    for line in text.splitlines():
        path, _, count = line.rpartition(" ")
        if not path or not count.lstrip("-").isdigit():
            raise Rejected(f"torch wrote a flame line that is not 'stack BYTES': {line!r}")
        rows.append((path.split(";"), int(count)))
    return rows


def torch_major_minor(torch):
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def run_torch_1_13(viz, snapshot):
    """torch 1.13: stats, segments, memory, compare over the segment list."""
    segments = snapshot["segments"]
    stats = viz.stats(segments)  # asserts each segment's total_size == sum of its blocks
    viz.segments(segments, format_flamegraph=folded_text)
    with contextlib.redirect_stdout(io.StringIO()):  # compare prints its set differences
        viz.compare(segments, segments, format_flamegraph=folded_text)
    print(f"torch 1.13 stats: {stats}")
    return viz.memory(segments, format_flamegraph=folded_text)


def check_html(html, snapshot, what):
    """trace_plot/segment_plot embed the snapshot as a base64 pickle: it must round-trip."""
    if not isinstance(html, str) or "<" not in html:
        raise Rejected(f"{what} returned no HTML")
    match = re.search(r'"base64":\s*"([A-Za-z0-9+/=]+)"', html)
    if not match:
        return  # a later torch may embed it differently; the call itself succeeded
    data = base64.b64decode(match.group(1))
    if pickle.loads(data) != snapshot:
        raise Rejected(f"{what}'s embedded snapshot differs from the file")


def run_torch_2(viz, snapshot):
    """torch >= 2.1: every reader the module offers over the dict."""
    summary = viz.segsum(snapshot)  # asserts each segment's blocks add up to total_size
    print(next((l for l in summary.splitlines() if l.startswith("segments:")), "segsum: no summary"))
    viz.trace(snapshot)
    viz.segments(snapshot, format_flamegraph=folded_text)
    with contextlib.redirect_stdout(io.StringIO()):  # compare prints its set differences
        viz.compare(snapshot["segments"], snapshot["segments"], format_flamegraph=folded_text)
    check_html(viz.trace_plot(snapshot), snapshot, "trace_plot")
    check_html(viz.trace_plot(snapshot, plot_segments=True), snapshot, "trace_plot(plot_segments=True)")
    check_html(viz.segment_plot(snapshot), snapshot, "segment_plot")
    print("torch 2.x: segsum, trace, segments, compare, trace_plot, segment_plot accepted it")
    return viz.memory(snapshot, format_flamegraph=folded_text)


def block_frames(block):
    """Every frame the pickle gives a block: legacy history entries and 2.x 'frames'."""
    for entry in block.get("history", []):
        yield from entry.get("frames", [])
    yield from block.get("frames", [])


def check_shape(snapshot):
    if not isinstance(snapshot, dict):
        raise Rejected(f"the pickle holds a {type(snapshot).__name__}, not the snapshot dict")
    for key in ("segments", "device_traces"):
        if not isinstance(snapshot.get(key), list):
            raise Rejected(f"the snapshot has no list '{key}'")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--expect-frame", action="append", default=[])
    parser.add_argument("--expect-top-frame")
    parser.add_argument("--expect-device-trace-actions")
    args = parser.parse_args()

    try:
        import torch
        import torch.cuda._memory_viz as viz
    except ImportError as error:
        print(f"SKIP: torch is not installed for {sys.executable} ({error}); "
              "scripts/setup installs Debian's python3-torch")
        return SKIP

    try:
        with open(args.file, "rb") as stream:
            snapshot = pickle.load(stream)
        check_shape(snapshot)
        version = torch_major_minor(torch)
        print(f"torch {torch.__version__}: {len(snapshot['segments'])} segments, "
              f"{sum(len(t) for t in snapshot['device_traces'])} trace events")
        if version >= (2, 1):
            memory_text = run_torch_2(viz, snapshot)
        else:
            memory_text = run_torch_1_13(viz, snapshot)
        rows = parse_folded(memory_text)

        for wanted in args.expect_frame:
            texts = [f"{f['filename']}:{f['line']}:{f['name']}"
                     for seg in snapshot["segments"] for b in seg["blocks"] for f in block_frames(b)]
            if not any(wanted in t for t in texts):
                raise Rejected(f"no block frame contains {wanted!r} ({len(texts)} frames)")
            print(f"frame {wanted!r}: found")

        if args.expect_top_frame:
            per_leaf = collections.Counter()
            for path, count in rows:
                # path = stream_N;STATE;root...;leaf
                if len(path) >= 3 and path[1] == "active_allocated" and path[-1] not in PSEUDO_LEAVES:
                    per_leaf[path[-1]] += count
            if not per_leaf:
                raise Rejected("torch's memory flame lines have no active_allocated block with a frame")
            top, top_bytes = max(per_leaf.items(), key=lambda item: (item[1], item[0]))
            print(f"top frame (memory flame leaf, bytes): {top} {top_bytes}")
            if args.expect_top_frame not in top:
                raise Rejected(f"top frame is {top!r}, expected it to contain {args.expect_top_frame!r}")

        if args.expect_device_trace_actions:
            seen = {e["action"] for trace in snapshot["device_traces"] for e in trace}
            missing = set(args.expect_device_trace_actions.split(",")) - seen
            print(f"device trace actions: {','.join(sorted(seen))}")
            if missing:
                raise Rejected(f"device_traces lack actions {','.join(sorted(missing))}")
    except Rejected as error:
        print(f"FAIL: {error}")
        return 1
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError,
            AssertionError, AttributeError, IndexError) as error:
        # What torch's own readers raise on a malformed snapshot.
        where = traceback.extract_tb(error.__traceback__)[-1]
        print(f"FAIL: torch {torch.__version__} could not read {args.file}: "
              f"{type(error).__name__}: {error} (in {where.name}, {where.filename}:{where.lineno})")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
