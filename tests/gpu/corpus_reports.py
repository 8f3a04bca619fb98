"""Reading `gpuleak run --json-report` files, for the GPU corpus runners.

Shared by torch_corpus.py, loops_corpus.py, holder_corpus.py and
client_matrix.py: load a report (schema gpuleak-report/1,
docs/json-schema.md), find the traced process that runs a program, and read
the holder a growth names.
"""
import json
import os
import shlex

REPORT_SCHEMA = "gpuleak-report/1"


def load_report(path):
    """(report dict, None) or (None, why it cannot be used)."""
    if not os.path.exists(path):
        return None, "no report: %s was not written" % os.path.join(*path.split(os.sep)[-2:])
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError) as error:
        return None, "report is not JSON: %s" % error
    if not isinstance(report, dict) or not isinstance(report.get("processes"), list):
        return None, "report has no 'processes' list"
    if report.get("schema") != REPORT_SCHEMA:
        return None, "report schema is %r, expected %r" % (report.get("schema"), REPORT_SCHEMA)
    return report, None


def command_words(process):
    command = process.get("command_line")
    if isinstance(command, list):
        return [str(word) for word in command]
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError:
            return command.split()
    return []


def runs_program(process, name):
    """Whether the process runs `name`: a script on its command line, or the executable itself."""
    executable = str(process.get("executable") or "")
    return any(word == name or word.endswith("/" + name) for word in command_words(process)) or executable.endswith(
        "/" + name
    )


def growth_of(process):
    growth = process.get("growth")
    return growth if isinstance(growth, dict) else {}


def pick_process(report, name):
    """The traced process that runs `name`: not a child of another one that does (DataLoader
    workers); among several, the one with the most steps."""
    processes = [p for p in report["processes"] if isinstance(p, dict) and runs_program(p, name)]
    if not processes:
        return None
    pids = {p.get("pid") for p in processes}
    top = [p for p in processes if p.get("parent_pid") not in pids] or processes
    return max(top, key=lambda p: growth_of(p).get("steps") or 0)


def holder_of(growth):
    """The holder object ({type, name, owner, ...}) from growth.holder, which is the site's answer
    of the holder annotation ({site_id, kind, holder: {...}, ...}); None when no holder was named."""
    value = growth.get("holder")
    if not isinstance(value, dict):
        return None, None
    if "holder" in value:
        inner = value.get("holder")
        return (inner if isinstance(inner, dict) else None), value.get("kind")
    if "type" in value or "name" in value:
        return value, None
    return None, value.get("kind")
