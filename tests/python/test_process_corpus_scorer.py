"""The GPU scorer of the process corpus (tests/gpu/process_corpus.py) scores what it is given, as corpus.json defines.

This tests the scorer, not gpuleak: hand-made JSON reports, truth files and
run records (what a GPU run observed: exit status, nvidia-smi's peaks) for
cases of examples/processes/corpus.json. One report passes every check; each
variant breaks one thing and must fail exactly that check, with a reason.
Also: every truth key a label names is one its script writes (read from the
scripts' source); --rescore over a folder with a malformed report fails that
case and scores the others; the runner, driving a stand-in `gpuleak` (a real
child process that leaves a process running), records the exit status, ends
what the case left running, and writes its results.

    /usr/bin/python3 -m pytest -q tests/python/test_process_corpus_scorer.py
"""
import ast
import copy
import importlib.util
import json
import os
import stat
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCORER_PATH = os.path.join(REPO, "tests", "gpu", "process_corpus.py")
CASES_DIR = os.path.join(REPO, "examples", "processes")
MIB = 2**20

spec = importlib.util.spec_from_file_location("process_corpus", SCORER_PATH)
scorer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scorer)

with open(os.path.join(CASES_DIR, "corpus.json"), encoding="utf-8") as handle:
    CORPUS = json.load(handle)
CASES = {case["script"][:-3]: case for case in CORPUS["cases"]}


def marked_line(script, text=None):
    """The first `# CUDA-INIT` line of a script (read here, not through the scorer)."""
    with open(os.path.join(CASES_DIR, script), encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if "# CUDA-INIT" in line and (text is None or text in line):
                return number
    raise AssertionError("no CUDA-INIT line in %s" % script)


def process(pid, role, gpu_work=True, site=None, peak_mib=None):
    return {
        "pid": pid,
        "parent_pid": 1,
        "role": role,
        "gpu_work": gpu_work,
        "cuda_first_use": None
        if site is None
        else {"time_s": 1.0, "device": 0, "context_created": True, "site": site, "frames": []},
        "device_memory": None
        if peak_mib is None
        else {"samples": 9, "peak_used_bytes": int(peak_mib * MIB), "context_and_modules_bytes": int(500 * MIB)},
        "summary": "peak",
    }


def site(script, line, function):
    return {
        "file": "/repo/examples/processes/" + script,
        "line": line,
        "function": function,
        "source_line": "x",
        "label": "%s:%d" % (script, line),
    }


def spawn_case():
    """dataloader_getitem_cuda_spawn: main 100, four workers with a context each, one worker_context finding."""
    script = "dataloader_getitem_cuda_spawn.py"
    truth = {"main": 100, "dataloader_worker": [101, 102, 103, 104]}
    init = site(script, marked_line(script), "GpuNormalizedImages.__getitem__")
    report = {
        "schema": "gpuleak-report/1",
        "processes": [],
        "job": {
            "main_pid": 100,
            "processes": [process(100, "main", site=site(script, 62, "main"), peak_mib=900)]
            + [process(pid, "dataloader_worker", site=init, peak_mib=600) for pid in truth["dataloader_worker"]],
            "findings": [{"kind": "worker_context", "pids": [104, 103, 102, 101], "summary": "4 workers"}],
        },
    }
    observed = {
        "exit_status": 0,
        "timed_out": False,
        "nvidia_smi_peak_mib": {"100": 920.0, "101": 610.0, "102": 600.0, "103": 590.0, "104": 640.0},
    }
    return CASES["dataloader_getitem_cuda_spawn"], truth, report, observed


def cpu_workers_case():
    """control_cpu_workers_spawn: main 200 on the GPU, four CPU-only workers, no finding."""
    script = "control_cpu_workers_spawn.py"
    truth = {"main": 200, "dataloader_worker": [201, 202, 203, 204]}
    report = {
        "schema": "gpuleak-report/1",
        "processes": [],
        "job": {
            "main_pid": 200,
            "processes": [process(200, "main", site=site(script, marked_line(script), "main"), peak_mib=800)]
            + [process(pid, "dataloader_worker", gpu_work=False) for pid in truth["dataloader_worker"]],
            "findings": [],
        },
    }
    observed = {"exit_status": 0, "timed_out": False, "nvidia_smi_peak_mib": {"200": 790.0}}
    text = "gpuleak: job of PID 200 (python3 x): 5 processes\n\ngpuleak: process 200 (python3 x), 9.0 s\n"
    return CASES["control_cpu_workers_spawn"], truth, report, observed, text


def failed(record):
    return sorted(check for check, ok in record["checks"].items() if ok is False)


def test_a_right_report_passes_every_check():
    case, truth, report, observed = spawn_case()
    record = scorer.score_case(case, truth, report, observed, "")
    assert record["checks"] == {
        "exit_status": True,
        "roles": True,
        "findings": True,
        "cuda_init": True,
        "summary_line_only": None,
        "context_memory": True,
    }
    assert record["pass"] and record["why"] == {}
    case, truth, report, observed, text = cpu_workers_case()
    record = scorer.score_case(case, truth, report, observed, text)
    assert record["pass"], record["why"]
    assert record["checks"]["summary_line_only"] is True and record["checks"]["findings"] is True


def variant(change):
    case, truth, report, observed = spawn_case()
    change(truth, report, observed)
    return scorer.score_case(case, truth, report, observed, "")


def workers(report):
    return [p for p in report["job"]["processes"] if p["role"] == "dataloader_worker"]


@pytest.mark.parametrize(
    "name, change, check, reason",
    [
        ("exit status", lambda t, r, o: o.update(exit_status=1), "exit_status", "exit status 1, expected 0"),
        ("timed out", lambda t, r, o: o.update(timed_out=True, timeout_s=90), "exit_status", "timed out"),
        ("a worker's role", lambda t, r, o: workers(r)[2].update(role="pool_worker"), "roles", "PID 103"),
        ("main's role", lambda t, r, o: r["job"]["processes"][0].update(role="subprocess"), "roles", "PID 100"),
        (
            "a pid left out of the finding",
            lambda t, r, o: r["job"]["findings"][0].update(pids=[101, 102, 103]),
            "findings",
            "names PIDs [101, 102, 103]",
        ),
        (
            "a pid too many in the finding",
            lambda t, r, o: r["job"]["findings"][0].update(pids=[100, 101, 102, 103, 104]),
            "findings",
            "expected [101, 102, 103, 104]",
        ),
        (
            "a finding too many",
            lambda t, r, o: r["job"]["findings"].append({"kind": "idle_worker_context", "pids": [101]}),
            "findings",
            "finding kinds",
        ),
        ("no finding", lambda t, r, o: r["job"]["findings"].clear(), "findings", "finding kinds none"),
        ("another kind", lambda t, r, o: r["job"]["findings"][0].update(kind="orphan"), "findings", "orphan"),
        (
            "CUDA first used off the marked line",
            lambda t, r, o: workers(r)[0].update(
                cuda_first_use={"site": dict(workers(r)[0]["cuda_first_use"]["site"], line=1)}
            ),
            "cuda_init",
            "not a CUDA-INIT line",
        ),
        (
            "CUDA first used in another function",
            lambda t, r, o: workers(r)[1].update(
                cuda_first_use={"site": dict(workers(r)[1]["cuda_first_use"]["site"], function="Images.__getitem__")}
            ),
            "cuda_init",
            "expected in GpuNormalizedImages.__getitem__",
        ),
        (
            "a name that only ends with the function's letters",
            lambda t, r, o: workers(r)[1].update(
                cuda_first_use={
                    "site": dict(workers(r)[1]["cuda_first_use"]["site"], function="MyGpuNormalizedImages.__getitem__")
                }
            ),
            "cuda_init",
            "expected in",
        ),
        (
            "CUDA first used in another file",
            lambda t, r, o: workers(r)[3].update(
                cuda_first_use={"site": dict(workers(r)[3]["cuda_first_use"]["site"], file="/usr/lib/torch/cuda.py")}
            ),
            "cuda_init",
            "not in dataloader_getitem_cuda_spawn.py",
        ),
        ("no first use", lambda t, r, o: workers(r)[3].update(cuda_first_use=None), "cuda_init", "no cuda_first_use"),
        (
            "memory 15 % off nvidia-smi",
            lambda t, r, o: o["nvidia_smi_peak_mib"].update({"102": 705.0}),
            "context_memory",
            "PID 102",
        ),
        (
            "memory nvidia-smi never saw",
            lambda t, r, o: o["nvidia_smi_peak_mib"].pop("101"),
            "context_memory",
            "nvidia-smi never listed it",
        ),
        (
            "no device memory in the report",
            lambda t, r, o: r["job"]["processes"][0].update(device_memory=None),
            "context_memory",
            "no device_memory.peak_used_bytes",
        ),
    ],
)
def test_each_broken_thing_fails_only_its_check(name, change, check, reason):
    record = variant(change)
    assert failed(record) == [check], name
    assert not record["pass"]
    assert any(reason in text for text in record["why"][check]), record["why"]


def test_memory_within_ten_percent_passes_and_a_qualified_function_name_matches():
    def change(truth, report, observed):
        observed["nvidia_smi_peak_mib"]["101"] = 660.0  # 600 reported: 9 % under
        workers(report)[0]["cuda_first_use"]["site"]["function"] = "mod.GpuNormalizedImages.__getitem__"

    assert variant(change)["pass"]


def test_summary_line_only_fails_for_gpu_work_or_a_text_section():
    case, truth, report, observed, text = cpu_workers_case()
    report = copy.deepcopy(report)
    report["job"]["processes"][2]["gpu_work"] = True
    record = scorer.score_case(case, truth, report, observed, text)
    assert failed(record) == ["summary_line_only"] and "PID 202" in record["why"]["summary_line_only"][0]
    case, truth, report, observed, text = cpu_workers_case()
    record = scorer.score_case(case, truth, report, observed, text + "\ngpuleak: process 203 (python3 -c x), 2 s\n")
    assert failed(record) == ["summary_line_only"] and "section" in record["why"]["summary_line_only"][0]


def test_a_control_with_any_finding_fails_findings():
    case, truth, report, observed, text = cpu_workers_case()
    report["job"]["findings"].append({"kind": "zombie", "pids": [201]})
    assert failed(scorer.score_case(case, truth, report, observed, text)) == ["findings"]


def test_empty_labels_do_not_apply_and_signals_read_as_128_plus():
    case = CASES["dataloader_getitem_cuda_fork_after_init"]
    truth = {"main": 300}
    report = {
        "schema": "gpuleak-report/1",
        "processes": [],
        "job": {
            "processes": [process(300, "main", site=site(case["script"], 44, "main"), peak_mib=500)],
            "findings": [],
        },
    }
    record = scorer.score_case(case, truth, report, {"exit_status": 1, "nvidia_smi_peak_mib": {"300": 500}}, None)
    assert record["pass"] and record["checks"]["cuda_init"] is None and record["checks"]["summary_line_only"] is None
    assert scorer.exit_status(-15) == 143 and scorer.exit_status(0) == 0 and scorer.exit_status(None) is None


@pytest.mark.parametrize(
    "report, reason",
    [
        (None, "no report"),
        ([], "not a JSON object"),
        ({"schema": "gpuleak-report/0", "job": {"processes": [], "findings": []}}, "schema"),
        ({"schema": "gpuleak-report/1", "processes": []}, "no 'job' object"),
        ({"schema": "gpuleak-report/1", "job": {"processes": {}, "findings": []}}, "no 'processes'"),
    ],
)
def test_an_unusable_report_fails_every_check_but_the_exit_status(report, reason):
    case, truth, _, observed = spawn_case()
    record = scorer.score_case(case, truth, report, observed, "")
    assert record["checks"]["exit_status"] is True and not record["pass"]
    assert failed(record) == ["context_memory", "cuda_init", "findings", "roles"]
    assert reason in record["error"]


def test_a_truth_file_without_a_key_fails_the_checks_that_need_it():
    case, truth, report, observed = spawn_case()
    del truth["dataloader_worker"]
    record = scorer.score_case(case, truth, report, observed, "")
    assert failed(record) == ["context_memory", "cuda_init", "findings", "roles"]
    assert any("no pids under 'dataloader_worker'" in text for text in record["why"]["roles"])


# --- the labels against the scripts ---------------------------------------------


def written_truth_keys(script):
    """Keys a script writes into its truth file: json.dump({...}) literals and write_truth(**roles) keywords."""
    with open(os.path.join(CASES_DIR, script), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    keys = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "dump" and node.args and isinstance(node.args[0], ast.Dict):
            keys.update(k.value for k in node.args[0].keys if isinstance(k, ast.Constant))
        if name == "write_truth":
            keys.update(k.arg for k in node.keywords if k.arg)
    return keys


def label_keys(case):
    expected = case["expected"]
    return (
        set(expected["roles"].values())
        | {f["processes"] for f in expected["findings"]}
        | set(expected["cuda_init"])
        | set(expected["summary_line_only"])
        | set(expected["context_memory"])
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_truth_key_a_label_names_is_written_by_its_script(name):
    case = CASES[name]
    assert label_keys(case) <= written_truth_keys(case["script"]), name
    marks = scorer.marked_lines(os.path.join(CASES_DIR, case["script"]))
    for where in case["expected"]["cuda_init"].values():
        function = (where or {}).get("function")
        assert function is None or function in marks.values(), (name, function, marks)


# --- the command line: --rescore, and the runner with a stand-in gpuleak --------


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


def recorded_run(folder):
    case, truth, report, observed = spawn_case()
    write(os.path.join(folder, "dataloader_getitem_cuda_spawn", "truth.json"), truth)
    write(os.path.join(folder, "dataloader_getitem_cuda_spawn", "report.json"), report)
    write(os.path.join(folder, "dataloader_getitem_cuda_spawn", "run.json"), observed)
    write(os.path.join(folder, "dataloader_getitem_cuda_spawn", "run.log"), "")
    case, truth, report, observed, text = cpu_workers_case()
    write(os.path.join(folder, "control_cpu_workers_spawn", "truth.json"), truth)
    write(os.path.join(folder, "control_cpu_workers_spawn", "report.json"), '{"schema": "gpuleak-rep')
    write(os.path.join(folder, "control_cpu_workers_spawn", "run.json"), observed)
    write(os.path.join(folder, "control_cpu_workers_spawn", "run.log"), text)
    return report


def run_scorer(*args, timeout=120):
    return subprocess.run(
        [sys.executable, SCORER_PATH] + list(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
    )


def test_rescore_scores_recorded_reports_and_a_malformed_one_fails_only_its_case(tmp_path):
    recorded_run(str(tmp_path / "run"))
    done = run_scorer("--rescore", str(tmp_path / "run"), "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr
    with open(str(tmp_path / "out" / "process-corpus.json")) as handle:
        results = json.load(handle)
    assert results["complete"] and results["mode"] == "rescore"
    by_case = {r["case"]: r for r in results["cases"]}
    assert sorted(by_case) == ["control_cpu_workers_spawn", "dataloader_getitem_cuda_spawn"]
    assert by_case["dataloader_getitem_cuda_spawn"]["pass"]
    bad = by_case["control_cpu_workers_spawn"]
    assert not bad["pass"] and "report is not JSON" in bad["error"] and bad["checks"]["exit_status"] is True
    totals = results["totals"]
    assert totals["passed"] == 1 and totals["failed"] == ["control_cpu_workers_spawn"]
    assert totals["finding_cases_passed"] == 1 and totals["controls_with_no_finding"] == 0
    assert totals["checks"]["roles"] == {"passed": 1, "applicable": 2}
    assert totals["context_size"]["workers"] == 4 and totals["context_size"]["median_nvidia_smi_peak_mib"] == 605.0
    assert "dataloader_getitem_cuda_spawn" in done.stdout and "1/2 cases pass" in done.stdout
    assert (
        run_scorer(
            "--rescore", str(tmp_path / "run"), "--out", str(tmp_path / "o2"), "--only", "no_such_case"
        ).returncode
        == 2
    )


STAND_IN_GPULEAK = r'''#!PYTHON
"""A stand-in gpuleak: `run` writes a report and a truth file, leaves a process running, exits 3;
`report TRACES --json-report F` writes the report kept in TRACES/good.json; `doctor --json` lists itself."""
import json, os, subprocess, sys, time
argv = sys.argv[1:]
if argv[0] == "doctor":
    print(json.dumps({"processes": [{"pid": os.getppid(), "verdict": "ok"}], "findings": []}))
    sys.exit(0)
if argv[0] == "report":
    with open(os.path.join(argv[1], "good.json")) as src, open(argv[argv.index("--json-report") + 1], "w") as out:
        out.write(src.read())
    print("gpuleak: job of PID 100")
    sys.exit(0)
program = argv[argv.index("--") + 1:]
traces = argv[argv.index("-o") + 1]
os.makedirs(traces)
open(os.path.join(traces, "x.trace"), "w").close()
left = subprocess.Popen(["sleep", "300"])
with open(program[program.index("--truth") + 1], "w") as out:
    json.dump({"main": os.getpid(), "dataloader_worker": [left.pid]}, out)
with open(argv[argv.index("--json-report") + 1], "w") as out:
    json.dump({"schema": "gpuleak-report/1", "processes": [], "job": {"processes": [], "findings": []}}, out)
time.sleep(1.5)
sys.exit(3)
'''


def stand_in(tmp_path):
    path = tmp_path / "gpuleak"
    path.write_text(STAND_IN_GPULEAK.replace("PYTHON", sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_runner_records_the_run_and_ends_what_the_case_left_running(tmp_path):
    gpuleak = stand_in(tmp_path)
    out = tmp_path / "out"
    done = run_scorer(
        "--gpuleak",
        gpuleak,
        "--out",
        str(out),
        "--only",
        "dataloader_getitem_cuda_spawn.py",
        "helper_cuinit_no_gpu_work",
        "--jobs",
        "2",
        "--no-context-probes",
        "--keep-traces",
        "helper_cuinit_no_gpu_work",
    )
    assert done.returncode == 1, done.stderr
    with open(str(out / "process-corpus.json")) as handle:
        results = json.load(handle)
    assert results["complete"] and len(results["cases"]) == 2
    for record in results["cases"]:
        assert record["exit_status"] == 3 and record["checks"]["exit_status"] is False
        assert not record["pass"] and "PID" in " ".join(record["why"]["roles"])
        left = record["truth"]["dataloader_worker"][0]
        assert left in record["left_running_and_ended"]
        deadline = time.monotonic() + 10
        while alive(left) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(left), "the process the case left running was not ended"
        with open(str(out / record["case"] / "run.json")) as handle:
            assert json.load(handle)["exit_status"] == 3
    spawn = next(r for r in results["cases"] if r["case"] == "dataloader_getitem_cuda_spawn")
    assert spawn["doctor"]["snapshots"] >= 1 and spawn["doctor"]["errors"] == []
    assert not (out / "dataloader_getitem_cuda_spawn" / "traces").exists()
    assert (out / "helper_cuinit_no_gpu_work" / "traces" / "x.trace").exists()


def test_rescore_with_gpuleak_makes_the_report_again_from_the_traces(tmp_path):
    good = recorded_run(str(tmp_path / "run"))
    case_dir = tmp_path / "run" / "control_cpu_workers_spawn"
    write(str(case_dir / "traces" / "good.json"), good)
    done = run_scorer(
        "--rescore",
        str(tmp_path / "run"),
        "--gpuleak",
        stand_in(tmp_path),
        "--out",
        str(tmp_path / "out"),
        "--only",
        "control_cpu_workers_spawn",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with open(str(tmp_path / "out" / "process-corpus.json")) as handle:
        record = json.load(handle)["cases"][0]
    assert record["pass"] and record["rescored_with"][1] == "report"
