#!/usr/bin/env python3
"""Reads a `gpuleak report --format csv` file with Python's csv module, the
way a spreadsheet import or pandas.read_csv sees it.

    check_csv.py FILE [--expect-columns a,b,c] [--expect-rows-min N] [--expect-site S]...

The header row names the columns; every row must have as many fields as the
header (csv.DictReader would otherwise pad or spill them silently).
--expect-columns: these columns exist (anywhere, in any order).
--expect-site S: some row has a field containing S in a column whose name
contains "site" (or, if none does, in any field).
Exit 0: parsed and the expectations hold; 1: not. Never 77: the csv module is
part of Python.
"""
import argparse
import csv
import sys


class Rejected(Exception):
    """The file is not well-formed CSV, or an expectation does not hold."""


def read_rows(path):
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            # strict: a stray quote inside a field is an error, not a guess.
            rows = list(csv.reader(stream, strict=True))
    except (csv.Error, UnicodeDecodeError) as error:
        raise Rejected(f"Python's csv module could not read {path}: {error}") from error
    if not rows or not any(rows[0]):
        raise Rejected("no header row")
    header, body = rows[0], rows[1:]
    if len(set(header)) != len(header):
        raise Rejected(f"duplicate column names in the header: {header}")
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise Rejected(f"line {number} has {len(row)} fields, the header has {len(header)}")
    return header, body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--expect-columns")
    parser.add_argument("--expect-rows-min", type=int)
    parser.add_argument("--expect-site", action="append", default=[])
    args = parser.parse_args()
    try:
        header, body = read_rows(args.file)
        print(f"columns: {','.join(header)}; {len(body)} rows")
        if args.expect_columns:
            wanted = args.expect_columns.split(",")
            missing = [c for c in wanted if c not in header]
            if missing:
                raise Rejected(f"missing columns {','.join(missing)} (the header is {','.join(header)})")
        if args.expect_rows_min is not None and len(body) < args.expect_rows_min:
            raise Rejected(f"{len(body)} rows, expected at least {args.expect_rows_min}")
        site_columns = [i for i, name in enumerate(header) if "site" in name.lower()] or range(len(header))
        for wanted in args.expect_site:
            if not any(wanted in row[i] for row in body for i in site_columns):
                raise Rejected(f"no row's {'site column' if 'site' in ''.join(header).lower() else 'field'} "
                               f"contains {wanted!r}")
            print(f"site {wanted!r}: found")
    except Rejected as error:
        print(f"FAIL: {error}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
