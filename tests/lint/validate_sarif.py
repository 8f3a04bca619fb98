#!/usr/bin/env python3
"""Validates `gpuleak lint --format sarif` against the SARIF 2.1.0 JSON schema.

Usage: validate_sarif.py GPULEAK SCHEMA PATH...

The schema comes from npm (@microsoft/jest-sarif, pinned in
package-lock.json); it is never copied into this repository. The report is
produced over PATHs that include files with findings and files that cannot
be linted, so results and tool notifications are both checked.
"""
import json
import subprocess
import sys

import jsonschema


def main():
    gpuleak, schema_path, *paths = sys.argv[1:]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    run = subprocess.run(
        [gpuleak, "lint", "--no-config", "--format", "sarif", *paths], capture_output=True, text=True, check=False
    )
    if run.returncode not in (0, 1, 3):
        print(f"gpuleak exited {run.returncode}: {run.stderr}", file=sys.stderr)
        return 1
    report = json.loads(run.stdout)
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
    for error in errors[:20]:
        where = "/".join(str(p) for p in error.path)
        print(f"SARIF schema violation at /{where}: {error.message}", file=sys.stderr)
    results = report["runs"][0]["results"]
    if not results:
        print("the report has no results to check", file=sys.stderr)
        return 1
    print(
        f"valid SARIF 2.1.0: {len(results)} results, "
        f"{len(report['runs'][0]['tool']['driver']['rules'])} rules "
        f"({validator_class.__name__})"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
