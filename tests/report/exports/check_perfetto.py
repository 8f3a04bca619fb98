#!/usr/bin/env python3
"""Checks a `gpuleak report --format perfetto` file: Trace Event Format JSON
(object form), which Perfetto's UI and chrome://tracing open.

    check_perfetto.py FILE [--expect-counter S]... [--expect-slices N]
                           [--expect-process-name S]... [--node PATH]

1. trace_event_schema.json (beside this file, written for gpuleak from the
   format's document) with python3-jsonschema, one event at a time so an
   error names the event and its phase.
2. What Perfetto's JSON importer needs beyond the schema: every E closes a B
   of the same (pid, tid), in ts order, and no B is left open.
3. When the trace has slices and Node is there, speedscope's own Trace Event
   Format importer (check_speedscope.mjs --input trace-event) must import it.

--expect-slices N: at least N slices (X events plus B/E pairs).
Exit 0: valid and the expectations hold; 1: not; 77: jsonschema missing.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = {"C": "counter", "X": "complete", "B": "begin", "E": "end", "i": "instant", "I": "instant",
          "M": "metadata"}
SPEEDSCOPE_TIMEOUT_S = 90


class Rejected(Exception):
    """The file breaks the format, or an expectation does not hold."""


def schema_errors(jsonschema, schema, trace):
    """Schema errors, at most five, each naming where it is."""
    errors = []
    top = dict(schema, properties=dict(schema["properties"], traceEvents={"type": "array"}))
    errors += [f"(root): {e.message}" for e in jsonschema.Draft7Validator(top).iter_errors(trace)]
    if errors:
        return errors
    per_phase = {}
    for i, event in enumerate(trace["traceEvents"]):
        phase = event.get("ph") if isinstance(event, dict) else None
        if phase not in PHASES:
            errors.append(f"traceEvents[{i}]: phase {phase!r} is none of {','.join(PHASES)}")
        else:
            validator = per_phase.setdefault(phase, jsonschema.Draft7Validator({
                "definitions": schema["definitions"],
                "allOf": [{"$ref": "#/definitions/common"}, {"$ref": f"#/definitions/{PHASES[phase]}"}]}))
            for error in validator.iter_errors(event):
                where = "".join(f"[{p!r}]" for p in error.absolute_path)
                errors.append(f"traceEvents[{i}] ({phase} {event.get('name')!r}){where}: {error.message}")
        if len(errors) >= 5:
            break
    return errors


def count_slices(events):
    """X events plus B/E pairs; raises when an E has no open B on its track."""
    slices = sum(1 for e in events if e["ph"] == "X")
    open_slices = collections.defaultdict(list)
    # Stable sort: at equal ts the file's order decides, as in Perfetto's importer.
    for event in sorted((e for e in events if e["ph"] in "BE"), key=lambda e: e["ts"]):
        track = (event["pid"], event["tid"])
        if event["ph"] == "B":
            open_slices[track].append(event)
        elif not open_slices[track]:
            raise Rejected(f"E {event.get('name')!r} at ts {event['ts']} on pid {track[0]} tid {track[1]} "
                           "closes no B")
        else:
            opened = open_slices[track].pop()
            if "name" in event and event["name"] != opened["name"]:
                raise Rejected(f"E {event['name']!r} at ts {event['ts']} closes B {opened['name']!r}")
            slices += 1
    left = [e for stack in open_slices.values() for e in stack]
    if left:
        raise Rejected(f"{len(left)} B events are never closed (first: {left[0].get('name')!r} at ts {left[0]['ts']})")
    return slices


def speedscope_import(node, file):
    checker = os.path.join(HERE, "check_speedscope.mjs")
    try:
        result = subprocess.run([node, checker, file, "--input", "trace-event"], capture_output=True,
                                text=True, timeout=SPEEDSCOPE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise Rejected(f"speedscope's import ran over {SPEEDSCOPE_TIMEOUT_S} s") from error
    lines = result.stdout.strip().splitlines()
    if result.returncode == SKIP:
        print(f"speedscope cross-check skipped: {lines[-1] if lines else ''}")
    elif result.returncode != 0:
        raise Rejected(f"speedscope's Trace Event importer refused it: {lines[-1] if lines else result.stderr}")
    else:
        print("speedscope " + "; ".join(l for l in lines if l.startswith(("imported as", "profiles"))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--expect-counter", action="append", default=[])
    parser.add_argument("--expect-slices", type=int)
    parser.add_argument("--expect-process-name", action="append", default=[])
    parser.add_argument("--node", default=shutil.which("node"))
    args = parser.parse_args()

    try:
        import jsonschema
    except ImportError:
        print(f"SKIP: python3-jsonschema is not installed for {sys.executable} (scripts/setup installs it)")
        return SKIP

    try:
        with open(os.path.join(HERE, "trace_event_schema.json"), encoding="utf-8") as stream:
            schema = json.load(stream)
        try:
            with open(args.file, encoding="utf-8") as stream:
                trace = json.load(stream)
        except (ValueError, UnicodeDecodeError) as error:
            raise Rejected(f"{args.file} is not JSON: {error}") from error
        errors = schema_errors(jsonschema, schema, trace)
        if errors:
            raise Rejected("trace_event_schema.json rejects it: " + "; ".join(errors))
        events = trace["traceEvents"]
        phases = collections.Counter(e["ph"] for e in events)
        print(f"schema: valid; {len(events)} events: "
              + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())))

        slices = count_slices(events)
        counters = sorted({e["name"] for e in events if e["ph"] == "C"})
        processes = sorted({e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"})
        print(f"slices: {slices}; counter tracks: {', '.join(counters) or 'none'}; "
              f"processes: {', '.join(processes) or 'none'}")

        if slices and args.node:
            speedscope_import(args.node, args.file)
        elif slices:
            print("speedscope cross-check skipped: node is not installed")

        for wanted in args.expect_counter:
            if not any(wanted in name for name in counters):
                raise Rejected(f"no counter track's name contains {wanted!r}")
        if args.expect_slices is not None and slices < args.expect_slices:
            raise Rejected(f"{slices} slices, expected at least {args.expect_slices}")
        for wanted in args.expect_process_name:
            if not any(wanted in name for name in processes):
                raise Rejected(f"no process_name metadata contains {wanted!r}")
    except Rejected as error:
        print(f"FAIL: {error}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
