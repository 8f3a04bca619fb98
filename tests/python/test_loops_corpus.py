"""The loop corpus (examples/loops/) is complete, its PyTorch programs run on the CPU, and its GPU scorer scores.

Run with Debian's Python, which has PyTorch (CPU) installed:

    /usr/bin/python3 -m pytest -q tests/python/test_loops_corpus.py

What it checks:
- corpus.json labels every program and agrees with the LEAK: markers (labels.py), covers the
  issue's list with at least 11 leaks and 7 controls, and every case names its public sources,
  which are also in the program's header;
- no program calls gpuleak, and only the cases whose report was written that way use torch.optim;
- every PyTorch program runs as a real child process with `--device cpu --iterations 3`, stops by
  itself and exits 0; the JAX and CuPy programs compile; the .cu programs compile where nvcc is;
- tests/gpu/loops_corpus.py, the GPU scorer, run against a stand-in `gpuleak` that writes reports
  (right, late, wrong, missing, malformed, or never): pass and fail per case, iterations counted in
  the program's iterations, a hung case's process group killed, the results file complete;
- the real `gpuleak report` on traces of the corpus recorded on the H200 (examples/traces/loops/,
  recorded by tests/gpu/suites/loops.sh): every one gets its labelled verdict, a leak within 50 of
  the program's iterations after warm-up, from iterations found in the allocations themselves.
"""
import ast
import concurrent.futures
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples", "loops")
SCORER = os.path.join(REPO, "tests", "gpu", "loops_corpus.py")
sys.path.insert(0, EXAMPLES)
import labels  # noqa: E402  (examples/loops/labels.py)

TORCH_PYTHON = os.environ.get("GPULEAK_TORCH_PYTHON", "/usr/bin/python3")
SMOKE_ITERATIONS = 3
CHILD_TIMEOUT_S = 600
CORPUS = labels.load_corpus()
CASES = CORPUS["cases"]
PROGRAMS = labels.corpus_programs()
TORCH_OPTIM_ALLOWED = {"gradient-accumulation", "validation-inside-training", "gradient-accumulation-done-right"}


def source_of(program):
    with open(os.path.join(EXAMPLES, program), encoding="utf-8") as handle:
        return handle.read()


def framework_of(program):
    return next(case["framework"] for case in CASES if case["program"] == program)


# --- the labels ----------------------------------------------------------------


def test_corpus_json_agrees_with_the_programs_and_the_issue_list():
    assert labels.problems(CORPUS) == []


def test_corpus_has_at_least_eleven_gated_leaks_and_seven_controls():
    leaks = [c for c in CASES if c["kind"] == "leak" and c["gate"]]
    controls = [c for c in CASES if c["kind"] == "control" and c["gate"]]
    assert len(leaks) >= 11 and len(controls) >= 7 and len(leaks) + len(controls) >= 18


def test_every_case_says_what_an_iteration_is_and_how_many_it_runs():
    for case in CASES:
        assert case["iteration"].strip(), case["id"]
        assert case["iterations"] >= (500 if case["kind"] == "control" else 100), case["id"]
        assert "Iteration:" in source_of(case["program"]), case["program"]


def test_leak_labels_give_bytes_and_a_fix_and_controls_state_their_verdict():
    for case in CASES:
        text = source_of(case["program"])
        if case["kind"] == "leak":
            assert case["bytes_per_iteration"] > 0, case["id"]
            assert "Leak:" in text and "Fix:" in text, case["program"]
        else:
            assert case["bytes_per_iteration"] == 0, case["id"]
            assert "NOT A LEAK" in text and "Verdict: NO LEAK" in text, case["program"]


def test_jax_cases_name_their_allocator_and_the_default_run_is_explained():
    jax_cases = [c for c in CASES if c["framework"] == "jax"]
    platform = [c for c in jax_cases if c["env"].get("XLA_PYTHON_CLIENT_ALLOCATOR") == "platform"]
    assert any(c["kind"] == "leak" for c in platform) and any(c["kind"] == "control" for c in platform)
    for case in jax_cases:
        if not case["gate"]:
            assert case["gate_note"].strip()
    assert [c["id"] for c in CASES if not c["gate"]] == ["leak_jax_metrics_on_device_default"]


def test_no_program_calls_gpuleak():
    for program in PROGRAMS:
        assert "gpuleak" not in source_of(program).lower(), program


def torch_optim_uses(program):
    """The torch.optim.<name> attributes the program's code (not its prose) uses."""
    tree = ast.parse(source_of(program))
    return sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "optim"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "torch"
        }
    )


def test_torch_optim_only_where_the_report_used_it():
    users = {case["id"]: torch_optim_uses(case["program"]) for case in CASES if case["program"].endswith(".py")}
    assert users["control_grad_accumulation_sawtooth"] == ["AdamW"]  # the check sees real uses
    for case_id, uses in users.items():
        if uses:
            assert case_by_id(case_id)["covers"] in TORCH_OPTIM_ALLOWED, (case_id, uses)


# --- the programs run ------------------------------------------------------------


def torch_programs():
    return [p for p in PROGRAMS if p.endswith(".py") and framework_of(p) == "pytorch"]


@pytest.fixture(scope="module")
def smoke_runs():
    if (
        subprocess.run(
            [TORCH_PYTHON, "-c", "import torch"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).returncode
        != 0
    ):
        pytest.skip("%s has no torch (apt-get install python3-torch)" % TORCH_PYTHON)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)

    def run(program):
        command = [
            TORCH_PYTHON,
            os.path.join(EXAMPLES, program),
            "--device",
            "cpu",
            "--iterations",
            str(SMOKE_ITERATIONS),
        ]
        try:
            done = subprocess.run(
                command,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                timeout=CHILD_TIMEOUT_S,
            )
            return done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired:
            return None, "", "timed out after %d s" % CHILD_TIMEOUT_S

    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(torch_programs(), pool.map(run, torch_programs())))


@pytest.mark.parametrize("program", torch_programs())
def test_pytorch_program_runs_on_cpu_and_stops_by_itself(smoke_runs, program):
    rc, stdout, stderr = smoke_runs[program]
    assert rc == 0, "rc=%s\n%s\n%s" % (rc, stdout[-2000:], stderr[-4000:])
    assert "iterations=%d" % SMOKE_ITERATIONS in stdout, stdout


@pytest.mark.parametrize("program", [p for p in PROGRAMS if p.endswith(".py")])
def test_python_program_compiles(program, tmp_path):
    py_compile.compile(os.path.join(EXAMPLES, program), cfile=str(tmp_path / "out.pyc"), doraise=True)


def nvcc():
    return shutil.which("nvcc") or next((path for path in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(path)), None)


@pytest.fixture(scope="module")
def nvcc_builds(tmp_path_factory):
    """Compiles every .cu program side by side; {program: (exit status, output)}."""
    compiler = nvcc()
    if compiler is None:
        pytest.skip("no nvcc here; the GPU suite (tests/gpu/suites/loops.sh) builds them")
    out_dir = tmp_path_factory.mktemp("nvcc")

    def build(program):
        done = subprocess.run(
            [
                compiler,
                "-std=c++17",
                "-arch=sm_90",
                "-o",
                str(out_dir / program),
                os.path.join(EXAMPLES, program),
                "-lcuda",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
        return done.returncode, done.stdout

    programs = [p for p in PROGRAMS if p.endswith(".cu")]
    with concurrent.futures.ThreadPoolExecutor(len(programs)) as pool:
        return dict(zip(programs, pool.map(build, programs)))


@pytest.mark.parametrize("program", [p for p in PROGRAMS if p.endswith(".cu")])
def test_cuda_program_compiles_with_nvcc(nvcc_builds, program):
    rc, output = nvcc_builds[program]
    assert rc == 0, output[-4000:]


# --- the GPU scorer, against a stand-in gpuleak ----------------------------------

FAKE_GPULEAK = r'''#!/usr/bin/env python3
"""Stand-in for `gpuleak run -o DIR --json-report FILE -- PROGRAM --iterations N`."""
import json, os, subprocess, sys, time
argv = sys.argv[1:]
assert argv[0] == "run", argv
out_dir = argv[argv.index("-o") + 1]
report_path = argv[argv.index("--json-report") + 1]
program = argv[argv.index("--") + 1:]
assert program[-2] == "--iterations", program
iterations = int(program[-1])
name = os.path.basename(program[1] if program[0].endswith("python3") else program[0])
plan = json.load(open(os.environ["FAKE_PLAN"]))[name]
assert os.path.isdir(out_dir) and not os.listdir(out_dir), "the scorer must hand over an empty -o folder"
open(os.path.join(out_dir, "process.trace"), "w").write("trace")
if plan["behaviour"] == "hang":
    child = subprocess.Popen(["sleep", "600"])
    open(os.environ["FAKE_PIDS"], "a").write("%d\n" % child.pid)
    time.sleep(600)
if plan["behaviour"] == "missing":
    sys.exit(1)
if plan["behaviour"] == "malformed":
    open(report_path, "w").write("{not json")
    sys.exit(0)
steps = plan.get("steps", iterations)
growth = {"verdict": plan["verdict"], "steps": steps, "step_source": plan.get("step_source", "loop-period"),
          "warmup_steps": 5, "verdict_step": plan.get("verdict_step"), "cause": plan.get("cause"),
          "rate_bytes_per_step": 4096, "sites": [{"site": {"file": "/x/" + name, "line": plan.get("line", 1),
                                                           "function": "f"}, "bounded": False}]}
worker = {"pid": 11, "parent_pid": 10, "command_line": program + ["--worker"], "growth": {"steps": 999}}
main = {"pid": 10, "parent_pid": 1, "command_line": program, "duration_s": 2.5, "growth": growth}
json.dump({"schema": "gpuleak-report/1", "processes": [worker, main]}, open(report_path, "w"))
'''


def load_scorer():
    spec = importlib.util.spec_from_file_location("loops_corpus_scorer", SCORER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def case_by_id(case_id):
    return next(case for case in CASES if case["id"] == case_id)


def marked_line(case_id):
    return int(case_by_id(case_id)["marked_lines"][0].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Runs the scorer on ten cases against the stand-in; returns (exit status, results, pids file)."""
    work = tmp_path_factory.mktemp("scorer")
    fake = work / "gpuleak"
    fake.write_text(FAKE_GPULEAK)
    fake.chmod(0o755)
    plan = {
        "leak_eval_loss_summed.py": {
            "behaviour": "report",
            "verdict": "LEAK",
            "verdict_step": 30,
            "line": marked_line("leak_eval_loss_summed"),
            "cause": "autograd-graph-kept-alive",
        },
        # 5 time windows over 200 iterations: verdict at window 50 is 45 x 40 = 1800 iterations
        "leak_rotary_cache_per_length.py": {
            "behaviour": "report",
            "verdict": "LEAK",
            "verdict_step": 50,
            "steps": 5,
            "step_source": "time-window",
        },
        "leak_streaming_lstm_state.py": {
            "behaviour": "report",
            "verdict": "NOT YET",
            "steps": 3,
            "step_source": "time-window",
        },
        "control_lru_cache_bounded.py": {"behaviour": "report", "verdict": "LEAK", "verdict_step": 60},
        "control_varying_shapes_inference.py": {"behaviour": "report", "verdict": "NO LEAK"},
        "control_empty_cache_every_iteration.py": {
            "behaviour": "report",
            "verdict": "NOT YET",
            "steps": 4,
            "step_source": "time-window",
        },
        "leak_serving_shape_keyed_cache.py": {"behaviour": "missing"},
        "leak_online_hedge_update.py": {"behaviour": "malformed"},
        "leak_render_frame_scene": {
            "behaviour": "report",
            "verdict": "LEAK",
            "verdict_step": 20,
            "line": marked_line("leak_render_frame_scene"),
        },
        "control_first_inference_warmup.py": {"behaviour": "hang"},
    }
    (work / "plan.json").write_text(json.dumps(plan))
    pids = work / "pids.txt"
    pids.write_text("")
    env = dict(os.environ, FAKE_PLAN=str(work / "plan.json"), FAKE_PIDS=str(pids))
    ids = [
        "leak_eval_loss_summed",
        "leak_rotary_cache_per_length",
        "leak_streaming_lstm_state",
        "control_lru_cache_bounded",
        "control_varying_shapes_inference",
        "control_empty_cache_every_iteration",
        "leak_serving_shape_keyed_cache",
        "leak_online_hedge_update",
        "leak_render_frame_scene",
        "control_first_inference_warmup",
    ]
    (work / "bin").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            SCORER,
            "--gpuleak",
            str(fake),
            "--cuda-bin",
            str(work / "bin"),
            "--out",
            str(work / "out"),
            "--jobs",
            "4",
            "--timeout",
            "5",
            "--only",
        ]
        + ids,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    results = json.loads((work / "out" / "loops-corpus.json").read_text())
    return done, {r["case"]: r for r in results["cases"]}, results, pids


def test_scorer_passes_a_leak_found_in_time_at_its_marked_line(scored):
    _, records, _, _ = scored
    record = records["leak_eval_loss_summed"]
    assert record["pass"] and record["got"]["site_match"] == "exact" and record["cause_matches"]
    assert record["got"]["iterations_to_verdict"] == 25 and record["got"]["pid"] == 10
    assert records["leak_render_frame_scene"]["pass"]
    assert records["leak_render_frame_scene"]["command"][-3].endswith("/bin/leak_render_frame_scene")


def test_scorer_counts_the_programs_iterations_not_gpuleaks_steps(scored):
    _, records, _, _ = scored
    record = records["leak_rotary_cache_per_length"]
    assert record["got"]["iterations_per_step"] == 40 and record["got"]["iterations_to_verdict"] == 1800
    assert not record["pass"] and record["checks"]["within_limit"] is False


def test_scorer_fails_not_yet_a_control_with_leak_and_broken_reports(scored):
    _, records, _, _ = scored
    assert not records["leak_streaming_lstm_state"]["pass"]
    assert not records["control_lru_cache_bounded"]["pass"]
    assert records["control_varying_shapes_inference"]["pass"]
    # the issue's rule for a control is "no LEAK"; staying NOT YET passes but is counted
    assert records["control_empty_cache_every_iteration"]["pass"]
    assert records["control_empty_cache_every_iteration"]["verdict_matches"] is False
    assert "no report" in records["leak_serving_shape_keyed_cache"]["error"]
    assert "not JSON" in records["leak_online_hedge_update"]["error"]


def test_scorer_kills_a_hung_case_with_its_process_group(scored):
    _, records, _, pids = scored
    record = records["control_first_inference_warmup"]
    assert record["timed_out"] and not record["pass"]
    for pid in filter(None, pids.read_text().split()):
        assert not os.path.exists("/proc/%s" % pid) or "Z" in open("/proc/%s/stat" % pid).read().split()[2]


def test_scorer_writes_complete_results_with_commands_and_exits_one(scored):
    done, records, results, _ = scored
    assert done.returncode == 1
    assert results["complete"] and results["totals"]["not_finished"] == []
    assert results["totals"]["controls_with_leak"] == ["control_lru_cache_bounded"]
    assert sorted(results["totals"]["controls_without_verdict"]) == [
        "control_empty_cache_every_iteration",
        "control_first_inference_warmup",
    ]
    for record in records.values():
        assert record["command"][1:3] == ["run", "-o"] and "--iterations" in record["command"]
    assert "gated cases pass" in done.stdout


def test_scorer_plain_mode_runs_programs_without_gpuleak(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            SCORER,
            "--plain",
            "--python",
            sys.executable,
            "--out",
            str(tmp_path),
            "--only",
            "control_eval_predictions_on_cpu",
            "--timeout",
            "5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    results = json.loads((tmp_path / "loops-corpus.json").read_text())
    record = results["cases"][0]
    assert results["mode"] == "plain" and record["command"][0] == sys.executable
    assert record["command"][-2:] == ["--iterations", "600"]
    # Without a GPU the program says so and exits 1; the scorer records that as a failure.
    assert record["pass"] == (record["exit_status"] == 0)
    assert results["totals"]["passed"] == int(record["pass"]) and done.returncode == (0 if record["pass"] else 1)


# --- the real analysis on traces recorded on the H200 ----------------------------

RECORDED = os.path.join(REPO, "examples", "traces", "loops")


def test_recorded_h200_traces_get_their_labelled_verdicts_from_loops_found_in_the_allocations(tmp_path):
    gpuleak = os.path.join(os.environ.get("GPULEAK_BUILD_DIR", os.path.join(REPO, "build")), "gpuleak")
    recorded = sorted(os.listdir(RECORDED))
    assert len(recorded) >= 4
    run = subprocess.run(
        [
            sys.executable,
            SCORER,
            "--gpuleak",
            gpuleak,
            "--rescore",
            RECORDED,
            "--out",
            str(tmp_path),
            "--jobs",
            "2",
            "--timeout",
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    with open(tmp_path / "loops-corpus.json", encoding="utf-8") as handle:
        results = json.load(handle)
    cases = {r["case"]: r for r in results["cases"]}
    assert sorted(cases) == recorded
    for name, record in cases.items():
        assert record["pass"], (name, record["got"], record["error"], run.stdout[-2000:])
        assert record["got"]["step_source"] == "allocation-period", (name, record["got"])
    kinds = {record["kind"] for record in cases.values()}
    frameworks = {record["framework"] for record in cases.values()}
    assert kinds == {"leak", "control"}
    assert {"pytorch", "jax", "cupy", "cuda-runtime"} <= frameworks, frameworks
    assert run.returncode == 0, run.stdout[-2000:]
