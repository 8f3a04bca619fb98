"""The depth corpus (examples/depth/, issue 37) is complete and its GPU scorer scores, on the CPU.

    /usr/bin/python3 -m pytest -q tests/python/test_depth_corpus.py

What it checks (no GPU, no PyTorch needed):
- corpus.json labels every program and agrees with the KEEP markers (labels.py --check): every
  item of issue 37's list has a leak and a control, every case names https sources that are also
  in its program's header, every leak lists the words its report must not contain;
- every Python program and the labels helper compile; no program calls gpuleak;
- tests/gpu/depth_corpus.py lists the cases and prints its commands without a GPU (--list,
  --dry-run), and scores stand-in reports: a right report passes every check that applies; a
  report with Python advice for a C++ allocation, a keeping line two lines off, a creating API
  named only in a stack frame or in the source text, or a view fixed with detach() fails the
  check it should, and a control that gets LEAK fails.
"""
import glob
import importlib.util
import json
import os
import py_compile
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples", "depth")
SCORER = os.path.join(REPO, "tests", "gpu", "depth_corpus.py")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))
depth_labels = load("depth_labels_test", os.path.join(EXAMPLES, "labels.py"))
scorer = load("depth_corpus_test", SCORER)
CORPUS = depth_labels.load_corpus()
CASES = {case["id"]: case for case in CORPUS["cases"]}


def test_labels_agree_with_the_programs():
    assert depth_labels.problems(CORPUS) == []
    leaks = [c for c in CORPUS["cases"] if c["kind"] == "leak"]
    controls = [c for c in CORPUS["cases"] if c["kind"] == "control"]
    assert len(leaks) >= 12 and len(controls) == len(leaks)
    for case in CORPUS["cases"]:
        assert CASES[case["pair"]]["pair"] == case["id"]


def test_programs_compile_and_do_not_call_gpuleak(tmp_path):
    for path in glob.glob(os.path.join(EXAMPLES, "*.py")):
        py_compile.compile(path, cfile=str(tmp_path / (os.path.basename(path) + "c")), doraise=True)
    for path in glob.glob(os.path.join(EXAMPLES, "*.py")) + glob.glob(os.path.join(EXAMPLES, "*.cu")):
        if os.path.basename(path) == "labels.py":
            continue
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        assert "import gpuleak" not in text and "gpuleak." not in text, path


def test_scorer_lists_and_dry_runs_without_a_gpu():
    listed = subprocess.run([sys.executable, SCORER, "--list"], capture_output=True, text=True, check=True).stdout
    for case_id in CASES:
        assert case_id[:40] in listed
    dry = subprocess.run(
        [sys.executable, SCORER, "--dry-run", "--out", "/tmp/depth-dry", "--cuda-bin", "/tmp/bin"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "prepare: python3 examples/depth/leak_extension_cudamalloc_per_call.py --build-only" in dry
    assert "-lcublas" in dry and "{cudnn}" in dry


def report(program, growth):
    return {
        "schema": "gpuleak-report/1",
        "processes": [
            {
                "pid": 10,
                "parent_pid": 1,
                "command_line": ["python3", "examples/depth/" + program],
                "executable": "/usr/bin/python3",
                "growth": growth,
            }
        ],
    }


def native_report(binary, growth):
    return {
        "schema": "gpuleak-report/1",
        "processes": [
            {
                "pid": 11,
                "parent_pid": 1,
                "command_line": ["/bin/" + binary, "--steps", "80"],
                "executable": "/bin/" + binary,
                "growth": growth,
            }
        ],
    }


def site(file_name, line, source=""):
    return {
        "site": {"file": "/repo/examples/depth/" + file_name, "line": line, "function": "f", "source_line": source},
        "frames": [{"function": "cublasCreate_v2", "file": "", "line": 0}],
    }


def test_a_right_cpp_library_report_passes():
    case = CASES["leak_cublas_handle_per_call"]
    line = depth_labels.line_of(case["expected"]["keep_line"])
    growth = {
        "verdict": "LEAK",
        "steps": 80,
        "warmup_steps": 5,
        "verdict_step": 20,
        "cause_text": "cublasCreate at leak_cublas_handle_per_call.cu:%d makes a handle per call" % line,
        "fix": "create one handle and reuse it; cublasDestroy it at exit",
        "sites": [site(case["program"], line)],
    }
    record = scorer.score_case(case, native_report("leak_cublas_handle_per_call", growth), None)
    assert record["pass"], record
    assert record["checks"]["library_api"] and record["checks"]["no_wrong_advice"]


def test_wrong_words_and_lines_fail_the_checks_they_should():
    case = CASES["leak_cublas_handle_per_call"]
    line = depth_labels.line_of(case["expected"]["keep_line"])
    growth = {
        "verdict": "LEAK",
        "steps": 80,
        "warmup_steps": 5,
        "verdict_step": 20,
        "cause_text": "tensors are kept alive by a Python reference",
        "fix": "store .item() copies",
        "sites": [site(case["program"], line + 2, "cublasCreate(&handle); cublasDestroy")],
    }
    record = scorer.score_case(case, native_report("leak_cublas_handle_per_call", growth), None)
    assert record["checks"]["no_wrong_advice"] is False
    assert record["checks"]["keeping_line"] is False
    assert record["checks"]["library_api"] is False  # named only in a frame and in the source text
    assert not record["pass"]


def test_a_view_fixed_with_detach_fails_and_with_clone_passes():
    case = CASES["leak_view_last_token_logits"]
    line = depth_labels.line_of(case["expected"]["keep_line"])
    holder = {
        "site_id": 1,
        "kind": "list",
        "holder": {"type": "list", "name": "last_token_logits", "kept_at": {"file": case["program"], "line": line}},
    }
    wrong = {
        "verdict": "LEAK",
        "steps": 50,
        "warmup_steps": 3,
        "verdict_step": 9,
        "holder": holder,
        "fix": "detach() before storing",
    }
    record = scorer.score_case(case, report(case["program"], wrong), None)
    assert record["checks"]["keeping_line"] and record["checks"]["view"] is False and not record["pass"]
    right = dict(wrong, fix="the kept element is a view of a 98 MiB tensor: store logits[:, -1, :].clone()")
    assert scorer.score_case(case, report(case["program"], right), None)["pass"]


def test_a_control_with_leak_fails_and_a_missing_report_fails():
    case = CASES["control_meter_update_item"]
    leaked = {"verdict": "LEAK", "steps": 100, "warmup_steps": 3, "verdict_step": 40}
    assert not scorer.score_case(case, report(case["program"], leaked), None)["pass"]
    clean = {"verdict": "NO LEAK", "steps": 100, "warmup_steps": 3, "verdict_step": None}
    assert scorer.score_case(case, report(case["program"], clean), None)["pass"]
    assert not scorer.score_case(CASES["leak_meter_update_keeps_graph"], None, "no report")["pass"]


def test_the_meter_counts_the_callers_line_and_slow_leaks_record_steps():
    case = CASES["leak_meter_update_keeps_graph"]
    caller = depth_labels.line_of(case["expected"]["caller_line"])
    holder = {"holder": {"type": "AverageMeter", "name": "sum", "kept_at": {"file": case["program"], "line": caller}}}
    growth = {"verdict": "LEAK", "steps": 100, "warmup_steps": 3, "verdict_step": 12, "holder": holder}
    assert scorer.score_case(case, report(case["program"], growth), None)["checks"]["keeping_line"]
    late = CASES["leak_starts_at_step_300"]
    growth = {"verdict": "LEAK", "steps": 700, "warmup_steps": 3, "verdict_step": 330, "first_growing_step": 300}
    record = scorer.score_case(late, report(late["program"], growth), None)
    assert record["checks"]["steps_needed"] and record["got"]["steps_to_verdict"] == 327
    assert record["late_start_seen"] is True
    json.dumps(record)
