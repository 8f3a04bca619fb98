"""The optional Lightning and transformers callbacks, through stand-in base classes.

Neither Lightning nor transformers is installed here: each test writes a
stand-in package whose Callback / TrainerCallback base is a plain class, and
a traced child drives the hooks in the order the real Trainer calls them.
The trace must hold the phases the callback began and ended
(gpuleak.begin_phase/end_phase) and one step per evaluation batch. The GPU
suite `clients` runs the real libraries.
"""

from conftest import BOOT_DIR, PACKAGE_DIR

import os

import pytest

import gpuleak

needs_phases = pytest.mark.skipif(
    not hasattr(gpuleak, "begin_phase"),
    reason="gpuleak.begin_phase/end_phase (the lead's phase API) are not in this tree yet",
)

STAND_IN_LIGHTNING = {
    "lightning/__init__.py": "",
    "lightning/pytorch/__init__.py": "class Callback:\n    pass\n",
}
STAND_IN_TRANSFORMERS = {
    "transformers/__init__.py": "class TrainerCallback:\n    pass\n",
}


def write_package(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def phases(run):
    return [(p["name"], p["event"]) for p in run.annotations("phase")]


@needs_phases
def test_lightning_loops_become_phases_and_their_batches_steps(run_traced, tmp_path):
    write_package(tmp_path / "stand-ins", STAND_IN_LIGHTNING)
    run = run_traced(
        """
from gpuleak.lightning_callback import GpuleakCallback
import lightning.pytorch

callback = GpuleakCallback()
assert isinstance(callback, lightning.pytorch.Callback)
trainer = module = None
callback.on_sanity_check_start(trainer, module)
callback.on_validation_start(trainer, module)
for i in range(2):
    callback.on_validation_batch_end(trainer, module, None, None, i)
callback.on_validation_end(trainer, module)
callback.on_sanity_check_end(trainer, module)
callback.on_validation_start(trainer, module)
for i in range(3):
    callback.on_validation_batch_end(trainer, module, None, None, i)
callback.on_validation_end(trainer, module)
callback.on_test_start(trainer, module)
callback.on_test_batch_end(trainer, module, None, None, 0)
callback.on_exception(trainer, module, RuntimeError("stopped"))
callback.on_test_end(trainer, module)
leave_traced_program()
""",
        {"PYTHONPATH": os.pathsep.join([BOOT_DIR, PACKAGE_DIR, str(tmp_path / "stand-ins")])},
    )
    assert run.returncode == 0, run.stderr
    assert run.gpuleak_lines() == []
    assert phases(run) == [
        ("sanity-check", "begin"),
        ("validation", "begin"),
        ("validation", "end"),
        ("sanity-check", "begin"),
        ("sanity-check", "end"),
        ("validation", "begin"),
        ("validation", "end"),
        ("test", "begin"),
        ("test", "end"),
    ]
    assert len(run.steps()) == 6, "one step per validation and test batch"


@needs_phases
def test_trainer_evaluation_becomes_a_phase_of_prediction_steps(run_traced, tmp_path):
    write_package(tmp_path / "stand-ins", STAND_IN_TRANSFORMERS)
    run = run_traced(
        """
from gpuleak.transformers_callback import GpuleakTrainerCallback
import transformers

callback = GpuleakTrainerCallback()
assert isinstance(callback, transformers.TrainerCallback)
for evaluation in range(2):
    for batch in range(4):
        callback.on_prediction_step(None, None, None)
    callback.on_evaluate(None, None, None, metrics={})
callback.on_evaluate(None, None, None, metrics={})  # nothing open: nothing ends
callback.on_train_end(None, None, None)
leave_traced_program()
""",
        {"PYTHONPATH": os.pathsep.join([BOOT_DIR, PACKAGE_DIR, str(tmp_path / "stand-ins")])},
    )
    assert run.returncode == 0, run.stderr
    assert phases(run) == [("evaluation", "begin"), ("evaluation", "end")] * 2
    assert len(run.steps()) == 8


@needs_phases
def test_the_callbacks_are_no_ops_outside_gpuleak_run(tmp_path):
    import subprocess
    import sys

    write_package(tmp_path / "stand-ins", {**STAND_IN_LIGHTNING, **STAND_IN_TRANSFORMERS})
    program = """
from gpuleak.lightning_callback import GpuleakCallback
from gpuleak.transformers_callback import GpuleakTrainerCallback
c = GpuleakCallback()
c.on_validation_start(None, None); c.on_validation_batch_end(None, None, None, None, 0)
c.on_validation_end(None, None)
t = GpuleakTrainerCallback()
t.on_prediction_step(None, None, None); t.on_evaluate(None, None, None)
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK")}
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_DIR, str(tmp_path / "stand-ins")])
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert done.stderr == ""
