#!/usr/bin/env python3
"""How `gpuleak lint` time and memory grow with the size of ONE file.

For each shape of bench/lint/make_large_python_file.py (many small functions; one function
holding everything) and each size (--sizes-mb, default 1 2 5 10), lints the file alone on one
thread and records wall seconds, MB/s and peak RSS (the child's ru_maxrss) per source byte.
`growth_over_linear` is (seconds at the largest size / seconds at the smallest) divided by
(largest size / smallest): about 1 when time grows linearly, the size ratio itself when it
grows quadratically. Both figures come from the same run on the same machine.

Usage (from the repository root):
    python3 bench/lint/large_file_scaling.py [--gpuleak build/gpuleak] [--sizes-mb 1 2 5 10]
        [--out bench/results/lint-large-file-scaling.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from lint_speed import timed_with_rss  # the same child timing as the speed bench


def lint_alone(gpuleak, path, timeout_s):
    seconds, exit_code, peak_rss_bytes, _ = timed_with_rss(
        [gpuleak, "lint", "--no-config", "--format", "json", "-j", "1", path], timeout_s
    )
    if seconds >= timeout_s:
        return {"timed_out": True, "seconds": timeout_s}
    return {"timed_out": False, "seconds": round(seconds, 3), "exit": exit_code, "peak_rss_bytes": peak_rss_bytes}


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpuleak", default=os.path.join(repo, "build", "gpuleak"))
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", default=os.path.join(repo, "bench", "results", "lint-large-file-scaling.json"))
    args = parser.parse_args()
    maker = os.path.join(repo, "bench", "lint", "make_large_python_file.py")
    result = {"suite": "lint-large-file-scaling", "gpuleak": args.gpuleak, "shapes": {}}
    with tempfile.TemporaryDirectory() as folder:
        for shape in ["many-functions", "one-function"]:
            rows = []
            for mb in args.sizes_mb:
                path = os.path.join(folder, f"{shape}-{mb}.py")
                subprocess.run([sys.executable, maker, "--shape", shape, "--mb", str(mb), "--out", path], check=True)
                size = os.path.getsize(path)
                row = {"mb": mb, "bytes": size, **lint_alone(args.gpuleak, path, args.timeout)}
                if not row["timed_out"]:
                    row["mb_per_s"] = round(size / 1e6 / max(row["seconds"], 1e-9), 2)
                    row["rss_bytes_per_source_byte"] = round(row["peak_rss_bytes"] / size, 1)
                os.remove(path)
                rows.append(row)
                print(shape, json.dumps(row), flush=True)
            first, last = rows[0], rows[-1]
            growth = None
            if not first["timed_out"] and not last["timed_out"]:
                growth = round((last["seconds"] / max(first["seconds"], 1e-9)) / (last["bytes"] / first["bytes"]), 2)
            result["shapes"][shape] = {"runs": rows, "growth_over_linear": growth}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(result, out, indent=1)
        out.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
