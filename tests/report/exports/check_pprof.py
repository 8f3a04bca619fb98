#!/usr/bin/env python3
"""Opens a `gpuleak report --format pprof` file (gzip profile.proto) with Go's
own pprof (`go tool pprof`, Debian's golang-go).

    check_pprof.py FILE [--sample-types a,b] [--expect-top SUBSTRING [--sample-index NAME]]
                        [--go PATH]

--sample-types: the profile's sample types, in order, exactly.
--expect-top: the first row of `go tool pprof -top` (largest flat value) for
--sample-index (default: the profile's default sample type).

pprof runs with -symbolize=none and HOME/GOCACHE/PPROF_TMPDIR in a temporary
folder, so it reads nothing but FILE and writes nothing outside that folder.
Exit 0: pprof read it and the expectations hold; 1: not; 77: no Go toolchain.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
PPROF_TIMEOUT_S = 60


class Rejected(Exception):
    """pprof refused the file, or an expectation does not hold."""


def run_pprof(go, env, *args):
    try:
        result = subprocess.run([go, "tool", "pprof", "-symbolize=none", *args], env=env,
                                capture_output=True, text=True, timeout=PPROF_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise Rejected(f"go tool pprof {' '.join(args)} ran over {PPROF_TIMEOUT_S} s") from error
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise Rejected(f"go tool pprof rejected it: {message[0] if message else 'exit ' + str(result.returncode)}")
    return result.stdout


def sample_types(raw_text):
    """From -raw: the line after 'Samples:' is 'type/unit[dflt] type/unit ...'."""
    lines = raw_text.splitlines()
    if "Samples:" not in lines:
        raise Rejected("go tool pprof -raw printed no Samples section")
    header = lines[lines.index("Samples:") + 1].split()
    return [re.sub(r"\[dflt\]$", "", entry).split("/")[0] for entry in header]


def top_row(top_text):
    """From -top: the first row under the 'flat  flat%  sum%  cum  cum%' header."""
    lines = top_text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:2] == ["flat", "flat%"]:
            rows = [l for l in lines[i + 1:] if l.strip()]
            if not rows:
                raise Rejected("go tool pprof -top printed no rows")
            fields = rows[0].split(None, 5)
            return fields[5], fields[0]
    raise Rejected("go tool pprof -top printed no table")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--sample-types")
    parser.add_argument("--expect-top")
    parser.add_argument("--sample-index")
    parser.add_argument("--go", default=shutil.which("go") or "/usr/bin/go")
    args = parser.parse_args()

    if not os.access(args.go, os.X_OK):
        print(f"SKIP: no Go toolchain at {args.go} (scripts/setup installs Debian's golang-go)")
        return SKIP

    with tempfile.TemporaryDirectory(prefix="gpuleak-pprof-") as home:
        # Go's pprof keeps state under HOME/PPROF_TMPDIR; GOPROXY=off keeps the go
        # command itself from ever reaching a network for `tool`.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "GOCACHE": home + "/cache",
               "PPROF_TMPDIR": home, "GOPROXY": "off", "GOTOOLCHAIN": "local"}
        try:
            version = subprocess.run([args.go, "version"], env=env, capture_output=True, text=True,
                                     timeout=PPROF_TIMEOUT_S, check=False).stdout.strip()
            print(f"consumer: {version}, go tool pprof")
            types = sample_types(run_pprof(args.go, env, "-raw", args.file))
            print(f"sample types: {','.join(types)}")
            if args.sample_types and types != args.sample_types.split(","):
                raise Rejected(f"sample types are {','.join(types)}, expected {args.sample_types}")
            if args.expect_top:
                index = ["-sample_index=" + args.sample_index] if args.sample_index else []
                name, flat = top_row(run_pprof(args.go, env, "-top", *index, args.file))
                print(f"top by flat{' ' + args.sample_index if args.sample_index else ''}: {name} {flat}")
                if args.expect_top not in name:
                    raise Rejected(f"top entry is {name!r}, expected it to contain {args.expect_top!r}")
        except Rejected as error:
            print(f"FAIL: {error}")
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
