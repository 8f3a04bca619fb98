"""The PyTorch leak corpus (examples/torch/) runs on the CPU and its labels are true there.

Run with Debian's Python, which has PyTorch (CPU) installed:

    /usr/bin/python3 -m pytest -q tests/python/test_torch_corpus_runs.py

What it checks:
- every leak_*.py and control_*.py script runs as a real child process with
  `--device cpu --steps 5` and exits 0;
- corpus.json labels every script, covers every required cause and pattern of
  the issue, and its marked lines match the `# LEAK:` markers;
- the labels describe what the scripts really do. A probe runs each script in a
  child process, marks a step at every `optimizer.step()` and `gpuleak.step()`
  (a stand-in module), and at each step sums the bytes of every live tensor
  storage, including the tensors saved by autograd graphs (seen through
  saved_tensors_hooks). Leaks must grow by their labelled bytes per step
  (exactly, where the label says exact); controls must be flat after their
  labelled growth steps. Host and device memory are the same thing on the CPU,
  so a case's CPU growth is its device growth plus its host growth, and the
  driver allocations of leak_driver_cudamalloc.py (CUDA only) are absent.

The GPU half of the story -- what gpuleak says about each script -- is
tests/gpu/torch_corpus.py.
"""
import concurrent.futures
import gc
import json
import os
import runpy
import subprocess
import sys
import time
import types
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples", "torch")
sys.path.insert(0, EXAMPLES)
import corpus_tools  # noqa: E402  (examples/torch/corpus_tools.py)

TORCH_PYTHON = os.environ.get("GPULEAK_TORCH_PYTHON", "/usr/bin/python3")
SMOKE_STEPS = 5
CHILD_TIMEOUT_S = 300

REQUIRED_LEAK_PATTERNS = {
    "list-of-losses",
    "list-of-outputs",
    "eval-total-loss",
    "retain-graph-in-loop",
    "rnn-hidden-without-detach",
    "cache-keyed-by-step",
    "forward-hook",
    "kept-exception",
    "metric-accumulated-as-tensors",
    "small-tensor-per-step",
}
REQUIRED_CONTROL_PATTERNS = {
    "allocator-warmup",
    "varying-sequence-length",
    "missing-zero-grad",
    "empty-cache-every-step",
    "bounded-replay-buffer",
    "small-replay-buffer",
}
# A control may jitter (varying sequence length) but must not trend: the
# robust slope of its live bytes after its growth steps stays under this.
CONTROL_MAX_SLOPE_BYTES_PER_STEP = 1024


# ---------------------------------------------------------------------------
# The probe: runs in the child process (this file run as a script).


class _Saved:
    """What saved_tensors_hooks stores instead of a tensor: a detached alias, visible to gc."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def _live_tensor_bytes(torch):
    storages = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            kind = type(obj)
            if kind is _Saved:
                tensor = obj.tensor
            elif issubclass(kind, torch.Tensor):
                tensor = obj
            else:
                continue
            try:
                storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
                storages[storage.data_ptr()] = storage.nbytes()
            except (RuntimeError, NotImplementedError):
                continue  # sparse, meta or other storage-less tensors
    return sum(storages.values())


def probe_main(argv):
    """python3 test_torch_corpus_runs.py --probe OUT.json EVERY SCRIPT ARGS...: samples live bytes per step."""
    out_path, every, script = argv[0], int(argv[1]), argv[2]
    import torch

    samples = []
    steps = [0]

    def mark_step():
        steps[0] += 1
        if steps[0] % every == 0:
            samples.append([steps[0], _live_tensor_bytes(torch)])

    stand_in = types.ModuleType("gpuleak")
    stand_in.step = mark_step
    sys.modules["gpuleak"] = stand_in

    def all_subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from all_subclasses(sub)

    for optimizer_class in set(all_subclasses(torch.optim.Optimizer)):
        if "step" in optimizer_class.__dict__:
            original = optimizer_class.__dict__["step"]

            def step(self, *args, __original=original, **kwargs):
                result = __original(self, *args, **kwargs)
                mark_step()
                return result

            optimizer_class.step = step

    torch.autograd.graph.saved_tensors_hooks(lambda t: _Saved(t.detach()), lambda s: s.tensor).__enter__()
    sys.argv = [script] + argv[3:]
    runpy.run_path(script, run_name="__main__")
    with open(out_path, "w") as handle:
        json.dump({"steps": steps[0], "samples": samples}, handle)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--probe":
    probe_main(sys.argv[2:])
    sys.exit(0)


# ---------------------------------------------------------------------------
# The tests: run under pytest.

import pytest  # noqa: E402

CORPUS = corpus_tools.load_corpus()
CASES = {case["script"]: case for case in CORPUS["cases"]}
SCRIPTS = corpus_tools.corpus_scripts()


def child_environment():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the scripts run without gpuleak, as a user would run them
    env["OMP_NUM_THREADS"] = "1"  # children run side by side
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def probe_plan(case):
    """(steps, sample every N steps, first step of the checked window) for a case."""
    if case["kind"] == "leak":
        return 16, 1, 4
    growth_steps = case.get("growth_steps", 0)
    if growth_steps < 50:
        return max(30, growth_steps + 25), 1, growth_steps + 5
    return growth_steps + 45, 5, growth_steps + 5


def run_child(command, cwd):
    try:
        result = subprocess.run(
            command,
            cwd=cwd,
            env=child_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
        return {"rc": result.returncode, "stdout": result.stdout, "stderr": result.stderr}
    except subprocess.TimeoutExpired as expired:
        return {"rc": None, "stdout": expired.stdout or "", "stderr": "timed out after %d s" % CHILD_TIMEOUT_S}


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    """Runs every smoke and probe child once, side by side; {(what, script): result}."""
    if not os.path.exists(TORCH_PYTHON):
        pytest.skip("%s does not exist (Debian's python3 with python3-torch)" % TORCH_PYTHON)
    if (
        subprocess.run(
            [TORCH_PYTHON, "-c", "import torch"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).returncode
        != 0
    ):
        pytest.skip("%s has no torch (apt-get install python3-torch)" % TORCH_PYTHON)
    out_dir = tmp_path_factory.mktemp("probe")
    jobs = {}
    for script in SCRIPTS:
        jobs[("smoke", script)] = [TORCH_PYTHON, script, "--device", "cpu", "--steps", str(SMOKE_STEPS)]
        if script in CASES:
            steps, every, _ = probe_plan(CASES[script])
            jobs[("probe", script)] = [
                TORCH_PYTHON,
                os.path.abspath(__file__),
                "--probe",
                str(out_dir / (script + ".json")),
                str(every),
                script,
                "--device",
                "cpu",
                "--steps",
                str(steps),
            ]
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {key: pool.submit(run_child, command, EXAMPLES) for key, command in jobs.items()}
        results = {key: future.result() for key, future in futures.items()}
    for script in SCRIPTS:
        path = out_dir / (script + ".json")
        if ("probe", script) in results and path.exists():
            results[("probe", script)]["probe"] = json.loads(path.read_text())
    return results


def describe(result):
    return "rc=%s\nstdout:\n%s\nstderr:\n%s" % (result["rc"], result["stdout"][-2000:], result["stderr"][-4000:])


def robust_slope(samples):
    """Theil-Sen slope (bytes per step) of [[step, bytes], ...]: the median of all pairwise slopes."""
    slopes = sorted((b2 - b1) / (s2 - s1) for i, (s1, b1) in enumerate(samples) for s2, b2 in samples[i + 1 :])
    middle = len(slopes) // 2
    return slopes[middle] if len(slopes) % 2 else (slopes[middle - 1] + slopes[middle]) / 2


def expected_cpu_bytes_per_step(case):
    device = 0 if case["expected"]["cause"] == "non-tensor-driver-allocations" else case["bytes_per_step"]
    return device + case.get("host_bytes_per_step", 0)


# --- every script runs -------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_runs_on_cpu_for_five_steps_and_exits_zero(children, script):
    result = children[("smoke", script)]
    assert result["rc"] == 0, describe(result)
    assert "steps=%d" % SMOKE_STEPS in result["stdout"] or "=%d " % SMOKE_STEPS in result["stdout"], describe(result)


# --- the labels cover what the issue asks for --------------------------------


def test_corpus_json_agrees_with_the_scripts_and_their_leak_markers():
    assert corpus_tools.problems(CORPUS) == []


def test_corpus_labels_every_script_and_nothing_else():
    assert sorted(CASES) == SCRIPTS
    assert len(CORPUS["cases"]) == len(CASES)


def test_corpus_has_at_least_twelve_leaks_and_five_controls():
    leaks = [c for c in CORPUS["cases"] if c["kind"] == "leak"]
    controls = [c for c in CORPUS["cases"] if c["kind"] == "control"]
    assert len(leaks) >= 12
    assert len(controls) >= 5
    assert all(c["script"].startswith("leak_") and c["expected"]["verdict"] == "LEAK" for c in leaks)
    assert all(c["script"].startswith("control_") and c["expected"]["verdict"] == "NO LEAK" for c in controls)


def test_corpus_covers_every_cause_and_every_required_pattern():
    causes = {c["expected"]["cause"] for c in CORPUS["cases"]}
    assert set(corpus_tools.ALL_CAUSES) <= causes
    assert causes - {None} <= set(corpus_tools.ALL_CAUSES)
    leak_patterns = {c["covers"] for c in CORPUS["cases"] if c["kind"] == "leak"}
    control_patterns = {c["covers"] for c in CORPUS["cases"] if c["kind"] == "control"}
    assert REQUIRED_LEAK_PATTERNS <= leak_patterns
    assert REQUIRED_CONTROL_PATTERNS <= control_patterns


def test_leak_labels_name_a_leak_cause_and_controls_do_not():
    for case in CORPUS["cases"]:
        expected = case["expected"]
        if case["kind"] == "leak":
            assert expected["cause"] in corpus_tools.LEAK_CAUSES, case["script"]
            assert case["bytes_per_step"] > 0, case["script"]
        else:
            assert expected["cause"] in (None, "bounded-growth"), case["script"]


def test_run_lengths_match_the_issue():
    for case in CORPUS["cases"]:
        if case["kind"] == "control":
            assert case["steps"] >= 500, case["script"]
        else:
            assert 100 <= case["steps"] <= 200, case["script"]


def test_small_tensor_case_leaks_4096_bytes_and_must_be_found_within_50_steps():
    case = CASES["leak_small_tensor_per_step.py"]
    assert case["bytes_per_step"] == 4096 and case["bytes_per_step_exact"]
    assert case["expected"]["max_steps_to_verdict"] == 50


def test_bounded_replay_buffer_grows_longer_than_warmup_and_names_its_bound():
    case = CASES["control_replay_buffer.py"]
    holder = case["expected"]["holder"]
    assert case["expected"]["cause"] == "bounded-growth"
    assert holder["type"] == "deque" and holder["bounded"] is True
    assert holder["maxlen"] == case["growth_steps"] >= 200
    assert "deque(maxlen=capacity)" in open(os.path.join(EXAMPLES, case["script"])).read()
    small = CASES["control_small_replay_buffer.py"]
    assert small["growth_steps"] <= 20


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_docstring_states_its_verdict_and_cause(script):
    text = open(os.path.join(EXAMPLES, script), encoding="utf-8").read()
    assert text.startswith('"""'), script
    docstring = text.split('"""')[1]
    case = CASES[script]
    if case["kind"] == "leak":
        assert "Cause: %s" % case["expected"]["cause"] in docstring
        assert "Fix:" in docstring
    else:
        assert docstring.startswith("NOT A") and "Verdict: NO LEAK" in docstring
    assert "--steps" in text and "--device" in text and "manual_seed" in text


# --- the labels are true on the CPU -------------------------------------------


def probe_result(children, script):
    result = children[("probe", script)]
    assert result["rc"] == 0, describe(result)
    assert "probe" in result, "the probe wrote no samples\n" + describe(result)
    return result["probe"]


@pytest.mark.parametrize("script", [c["script"] for c in CORPUS["cases"] if c["kind"] == "leak"])
def test_leak_keeps_its_labelled_bytes_every_step(children, script):
    case = CASES[script]
    probe = probe_result(children, script)
    steps, _, first_checked = probe_plan(case)
    assert probe["steps"] == steps, "the script did not mark one step per optimizer step or batch"
    window = [s for s in probe["samples"] if s[0] >= first_checked]
    growth = [b2 - b1 for (_, b1), (_, b2) in zip(window, window[1:])]
    expected = expected_cpu_bytes_per_step(case)
    if case["bytes_per_step_exact"]:
        assert growth == [expected] * len(growth), "live bytes grew %s per step, label says %d" % (growth, expected)
    else:
        slope = robust_slope(window)
        assert slope >= expected / 2, "live bytes grew %.0f per step, label says about %d" % (slope, expected)
        assert min(growth) > 0, growth


@pytest.mark.parametrize("script", [c["script"] for c in CORPUS["cases"] if c["kind"] == "control"])
def test_control_is_flat_after_its_growth_steps(children, script):
    case = CASES[script]
    probe = probe_result(children, script)
    steps, _, first_checked = probe_plan(case)
    assert probe["steps"] == steps
    window = [s for s in probe["samples"] if s[0] >= first_checked]
    assert len(window) >= 8
    slope = robust_slope(window)
    host = case.get("host_bytes_per_step", 0)
    if host:  # on the CPU, the kept host copies are the live tensors
        assert slope == host, "live bytes grew %.0f per step, label says %d of host memory" % (slope, host)
    else:
        assert abs(slope) < CONTROL_MAX_SLOPE_BYTES_PER_STEP, "live bytes trend by %.0f per step after step %d" % (
            slope,
            first_checked,
        )


@pytest.mark.parametrize(
    "script",
    [
        c["script"]
        for c in CORPUS["cases"]
        if c["kind"] == "control" and c.get("growth_steps", 0) >= 10 and c["bytes_per_step"]
    ],
)
def test_bounded_control_grows_by_its_label_until_full(children, script):
    case = CASES[script]
    probe = probe_result(children, script)
    growing = [s for s in probe["samples"] if 5 <= s[0] <= case["growth_steps"]]
    assert len(growing) >= 2
    assert robust_slope(growing) == case["bytes_per_step"]


# --- the GPU runner's scoring, against fake reports ----------------------------
# tests/gpu/torch_corpus.py runs on the GPU machine; here a stand-in `gpuleak`
# writes reports (right, wrong, missing, malformed, or never) so that its
# comparison, process handling and bookkeeping are checked without a GPU.

import importlib.util  # noqa: E402

RUNNER_PATH = os.path.join(REPO, "tests", "gpu", "torch_corpus.py")


def load_runner():
    spec = importlib.util.spec_from_file_location("torch_corpus_runner", RUNNER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FAKE_GPULEAK = r'''#!/usr/bin/env python3
"""Stand-in for `gpuleak run -o DIR --json-report FILE -- python3 SCRIPT --steps N`."""
import json, os, subprocess, sys, time
argv = sys.argv[1:]
assert argv[0] == "run", argv
out_dir = argv[argv.index("-o") + 1]
report_path = argv[argv.index("--json-report") + 1]
program = argv[argv.index("--") + 1:]
script_path = program[1]
script = os.path.basename(script_path)
assert program[2] == "--steps" and int(program[3]) > 0, program
plan = json.load(open(os.environ["FAKE_PLAN"]))
corpus = json.load(open(os.environ["FAKE_CORPUS"]))
case = [c for c in corpus["cases"] if c["script"] == script][0]
behaviour = plan.get(script, "right")
assert os.path.isdir(out_dir) and not os.listdir(out_dir), "the runner must hand over an empty -o folder"
if behaviour == "hang":
    child = subprocess.Popen(["sleep", "600"])
    with open(os.environ["FAKE_PIDS"], "a") as pids:
        pids.write("%d %d\n" % (os.getpid(), child.pid))
    time.sleep(600)
if behaviour == "missing":
    sys.exit(1)
if behaviour == "malformed":
    open(report_path, "w").write("{not json")
    sys.exit(0)
expected = case["expected"]
warmup = 10
marked = case.get("marked_line")
line = int(marked.rsplit(":", 1)[1]) if marked else 1
holder = dict(expected["holder"]) if expected.get("holder") else None
if holder and holder.get("owner", "").startswith("local of"):
    holder["owner"] += " (%s:3)" % script
growth = {
    "verdict": expected["verdict"], "cause": expected.get("cause"), "steps": int(program[3]),
    "warmup_steps": warmup, "rate_bytes_per_step": case["bytes_per_step"],
    "first_growing_step": warmup + 1 if expected["verdict"] == "LEAK" else None,
    "verdict_step": warmup + 20 if expected["verdict"] == "LEAK" else None,
    "sites": [{"site_id": 7, "rate_bytes_per_step": case["bytes_per_step"],
               "site": {"file": os.path.abspath(script_path), "line": line, "function": "f"}}]
             if expected["verdict"] == "LEAK" else [],
    "holder": {"site_id": 7, "kind": "tensor", "holder": holder} if holder else None,
}
if behaviour == "wrong-cause":
    growth["cause"] = "autograd-graph-kept-alive"
if behaviour == "slow":
    growth["verdict_step"] = warmup + 60
if behaviour == "control-leak":
    growth["verdict"], growth["verdict_step"], growth["cause"] = "LEAK", 40, "tensors-kept-alive"
if behaviour == "site-elsewhere":
    growth["sites"][0]["site"]["line"] = 1
if behaviour == "holder-alternative":
    growth["holder"]["holder"] = dict(expected["holder_alternatives"][0])
if behaviour == "no-holder":
    growth["holder"] = None
command = " ".join(program)
report = {"schema": "gpuleak-report/1", "processes": [
    {"pid": 100, "parent_pid": 1, "command_line": "python3 -c pass", "growth": {"verdict": "NO LEAK"}},
    {"pid": 101, "parent_pid": 1, "command_line": command, "growth": growth},
    {"pid": 102, "parent_pid": 101, "command_line": command,  # a DataLoader worker: same command line
     "growth": {"verdict": "LEAK", "cause": "tensors-kept-alive", "steps": 999}},
]}
open(report_path, "w").write(json.dumps(report))
'''

FAKE_PLAN = {
    "leak_loss_list.py": "wrong-cause",
    "leak_outputs_list.py": "missing",
    "leak_closure_logger.py": "malformed",
    "leak_cache_keyed_by_step.py": "hang",
    "leak_small_tensor_per_step.py": "slow",
    "control_varying_seq_len.py": "control-leak",
    "leak_metric_tensor_accumulated.py": "site-elsewhere",
    "leak_exception_traceback.py": "holder-alternative",
    "leak_module_attribute_history.py": "no-holder",
}


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("runner")
    fake = work / "gpuleak"
    fake.write_text(FAKE_GPULEAK.replace("/usr/bin/env python3", sys.executable, 1))
    fake.chmod(0o755)
    (work / "plan.json").write_text(json.dumps(FAKE_PLAN))
    env = dict(
        os.environ,
        FAKE_PLAN=str(work / "plan.json"),
        FAKE_CORPUS=corpus_tools.CORPUS_JSON,
        FAKE_PIDS=str(work / "pids"),
    )
    out = work / "out"
    out.mkdir()
    (out / "leak_loss_list").mkdir()
    (out / "leak_loss_list" / "gpuleak-1.trace").write_text("an earlier run")  # must be cleared
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, RUNNER_PATH, "--gpuleak", str(fake), "--out", str(out), "--jobs", "4", "--timeout", "4"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    wall_s = time.monotonic() - started
    results = json.loads((out / "torch-corpus.json").read_text())
    return {
        "result": result,
        "results": results,
        "work": work,
        "out": out,
        "wall_s": wall_s,
        "cases": {c["script"]: c for c in results["cases"]},
    }


def test_runner_normalizes_owners_and_matches_holders():
    runner = load_runner()
    assert runner.normalize_owner("local of train (x.py:12)") == "local of train"
    assert runner.normalize_owner("closure of make_logger.<locals>.log") == "closure of log"
    assert runner.normalize_owner("attribute of __main__.Encoder") == "attribute of Encoder"
    assert runner.normalize_owner("module __main__") == "module __main__"
    assert runner.normalize_owner("hook on torch.nn.modules.conv.Conv2d") == "hook on Conv2d"
    expected = {
        "type": "deque",
        "name": "transitions",
        "owner": "attribute of ReplayBuffer",
        "bounded": True,
        "maxlen": 200,
    }
    got = dict(expected, path="ReplayBuffer.transitions", length=200)
    assert runner.holder_matches(expected, got)
    assert not runner.holder_matches(expected, dict(got, maxlen=None, bounded=False))
    assert not runner.holder_matches(expected, dict(got, name="buffer"))
    assert not runner.holder_matches(expected, None)


def test_runner_takes_the_holder_from_the_holder_annotation_site_object():
    runner = load_runner()
    inner = {"type": "list", "name": "losses", "owner": "module __main__"}
    assert runner.holder_of({"holder": {"site_id": 3, "kind": "graph", "holder": inner}}) == (inner, "graph")
    assert runner.holder_of({"holder": {"site_id": 3, "kind": "unknown", "holder": None}}) == (None, "unknown")
    assert runner.holder_of({"holder": inner}) == (inner, None)
    assert runner.holder_of({"holder": None}) == (None, None)


def test_runner_places_a_site_on_the_marked_line_or_in_its_function():
    runner = load_runner()
    case = dict(CASES["leak_cache_keyed_by_step.py"])
    path = os.path.join(EXAMPLES, case["script"])
    ranges = corpus_tools.function_ranges(path)
    marked = int(case["marked_line"].rsplit(":", 1)[1])
    forward_line = ranges["BagOfWords.forward"][1]

    def site(file, line):
        return {"site": {"file": file, "line": line, "function": "?"}}

    assert runner.site_match(case, site("/x/examples/torch/" + case["script"], marked), ranges) == "exact"
    assert runner.site_match(case, site(case["script"], marked - 1), ranges) == "function"
    assert runner.site_match(case, site(case["script"], forward_line), ranges) == "function"
    assert runner.site_match(case, site(case["script"], 1), ranges) == "no"
    assert runner.site_match(case, site("/usr/lib/python3/torch/nn/functional.py", marked), ranges) == "no"
    assert runner.site_match(case, None, ranges) == "no"


def test_runner_scores_every_case_and_exits_one_when_any_fails(fake_run):
    results = fake_run["results"]
    assert fake_run["result"].returncode == 1, fake_run["result"].stderr
    assert results["schema"] == "gpuleak-torch-corpus-results/1"
    assert sorted(fake_run["cases"]) == SCRIPTS
    failed = {c["script"] for c in results["cases"] if not c["pass"]}
    assert failed == set(FAKE_PLAN) - {"leak_exception_traceback.py"}
    assert results["totals"]["passed"] == len(SCRIPTS) - len(failed)
    assert "--gpuleak" in results["command"]
    assert "cases pass" in fake_run["result"].stdout


def test_runner_passes_a_right_report_with_holder_owner_location_and_worker_process(fake_run):
    case = fake_run["cases"]["leak_retain_graph_loop.py"]
    assert case["pass"], case
    assert case["got"]["pid"] == 101  # the training process, not its worker or an unrelated one
    assert case["got"]["site_match"] == "exact"
    assert case["got"]["steps_to_verdict"] == 20
    assert case["checks"]["control_no_leak"] is None
    assert case["command"][1:3] == ["run", "-o"] and case["command"][-2:] == ["--steps", "120"]
    replay = fake_run["cases"]["control_replay_buffer.py"]
    assert replay["pass"] and replay["checks"]["holder"] is True and replay["checks"]["control_no_leak"] is True


def test_runner_fails_each_wrong_field_and_says_why(fake_run):
    cases = fake_run["cases"]
    assert cases["leak_loss_list.py"]["checks"]["cause"] is False
    assert cases["leak_loss_list.py"]["checks"]["verdict"] is True
    assert "no report" in cases["leak_outputs_list.py"]["error"]
    assert "not JSON" in cases["leak_closure_logger.py"]["error"]
    assert cases["leak_small_tensor_per_step.py"]["checks"]["steps_to_verdict"] is False
    assert cases["leak_small_tensor_per_step.py"]["got"]["steps_to_verdict"] == 60
    assert cases["leak_metric_tensor_accumulated.py"]["got"]["site_match"] == "no"
    assert cases["leak_module_attribute_history.py"]["checks"]["holder"] is False
    assert cases["leak_exception_traceback.py"]["checks"]["holder"] is True
    control = cases["control_varying_seq_len.py"]
    assert control["checks"]["control_no_leak"] is False and control["checks"]["verdict"] is False
    totals = fake_run["results"]["totals"]
    assert totals["controls_with_leak"] == ["control_varying_seq_len"]
    assert totals["small_tensor_steps_to_verdict"] == 60 and not totals["small_tensor_found_within_50"]


def test_runner_kills_a_hanging_case_with_its_children_and_goes_on(fake_run):
    case = fake_run["cases"]["leak_cache_keyed_by_step.py"]
    assert case["timed_out"] and not case["pass"] and "timed out" in case["error"]
    pids = [int(pid) for pid in (fake_run["work"] / "pids").read_text().split()]  # fake gpuleak, its child
    assert len(pids) == 2
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive = not open("/proc/%d/stat" % pid).read().split()[2] == "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        assert not alive, "process %d of the timed-out case is still running" % pid
    assert fake_run["wall_s"] < 60


def test_runner_clears_traces_of_an_earlier_run(fake_run):
    assert not (fake_run["out"] / "leak_loss_list" / "gpuleak-1.trace").exists()
