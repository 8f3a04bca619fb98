"""Step boundaries: which optimizer steps count, explicit steps, and the real hook in torch."""

import gc

from gpuleak._steps import StepClock


class FakeCollector:
    """Stands in for the ctypes collector: records what the clock marks.

    `marked` holds the pacing steps as (step, source); `all_marks` every step
    as (step, source, clock, pacing)."""

    def __init__(self):
        self.marked = []
        self.all_marks = []

    def mark_clock_step(self, step, source, clock, pacing):
        self.all_marks.append((step, source, clock, pacing))
        if pacing:
            self.marked.append((step, source))


class Optimizer:
    """Anything with an identity and weak references, like torch optimizers."""


def optimizer_step(clock, optimizer, with_pre_hook=True, inner=None):
    if with_pre_hook:
        clock.on_optimizer_step_started(optimizer, (), {})
    if inner is not None:
        optimizer_step(clock, inner, with_pre_hook)
    clock.on_optimizer_step_finished(optimizer, (), {})


def test_one_optimizer_marks_every_step_in_order():
    collector = FakeCollector()
    clock = StepClock(collector)
    adam = Optimizer()
    for _ in range(5):
        optimizer_step(clock, adam)
    assert collector.marked == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]


def test_gan_with_two_optimizers_marks_one_step_per_iteration():
    collector = FakeCollector()
    clock = StepClock(collector)
    discriminator, generator = Optimizer(), Optimizer()
    for _ in range(10):
        optimizer_step(clock, discriminator)
        optimizer_step(clock, generator)
    assert [step for step, _ in collector.marked] == list(range(1, 11))


def test_gan_without_pre_hooks_marks_one_step_per_iteration():
    # torch 1.x: only the post-step callback exists.
    collector = FakeCollector()
    clock = StepClock(collector)
    discriminator, generator = Optimizer(), Optimizer()
    for _ in range(10):
        optimizer_step(clock, discriminator, with_pre_hook=False)
        optimizer_step(clock, generator, with_pre_hook=False)
    assert len(collector.marked) == 10


def test_critic_stepping_five_times_per_generator_step_takes_over_once():
    # WGAN: the generator stepped first, then the critic steps 5x per iteration.
    collector = FakeCollector()
    clock = StepClock(collector)
    critic, generator = Optimizer(), Optimizer()
    optimizer_step(clock, generator)
    for _ in range(4):
        for _ in range(5):
            optimizer_step(clock, critic)
        optimizer_step(clock, generator)
    # generator's first step, then the critic paces: 4 critic steps on the
    # first round after taking over (the 2nd one adopts it), then 5 a round.
    assert len(collector.marked) == 1 + 4 + 5 * 3


def test_an_optimizer_used_only_for_warm_up_hands_over_to_the_next():
    collector = FakeCollector()
    clock = StepClock(collector)
    warm_up = Optimizer()
    for _ in range(3):
        optimizer_step(clock, warm_up)
    main = Optimizer()  # warm_up stays referenced but never steps again
    for _ in range(6):
        optimizer_step(clock, main)
    # main's first step is the one step lost while it proves it took over
    assert len(collector.marked) == 3 + 5


def test_a_dropped_pacer_is_replaced_at_once():
    collector = FakeCollector()
    clock = StepClock(collector)
    first = Optimizer()
    optimizer_step(clock, first)
    del first
    gc.collect()
    second = Optimizer()
    for _ in range(3):
        optimizer_step(clock, second)
    assert len(collector.marked) == 4


def test_nested_step_of_a_wrapped_optimizer_counts_once():
    # Lookahead-style: the outer optimizer's step() runs the inner one's.
    collector = FakeCollector()
    clock = StepClock(collector)
    outer, inner = Optimizer(), Optimizer()
    for _ in range(6):
        optimizer_step(clock, outer, inner=inner)
    assert len(collector.marked) == 6


def test_step_that_raised_does_not_stop_step_marking():
    collector = FakeCollector()
    clock = StepClock(collector)
    first, second = Optimizer(), Optimizer()
    clock.on_optimizer_step_started(first, (), {})  # its step() raised: no post hook
    for _ in range(5):
        optimizer_step(clock, second)
    # the second optimizer's first step is taken for nested, then it paces
    assert len(collector.marked) == 4


def test_explicit_steps_pace_where_they_are_marked_and_optimizer_steps_are_still_marked():
    collector = FakeCollector()
    clock = StepClock(collector)
    adam = Optimizer()
    optimizer_step(clock, adam)
    optimizer_step(clock, adam)
    for _ in range(3):
        optimizer_step(clock, adam)
        clock.explicit_step()
    # Every step reaches the trace; once gpuleak.step() marks one between two
    # optimizer steps, the explicit steps are the ones that pace.
    assert [(s, src) for s, src, _, _ in collector.all_marks] == [
        (1, 1),
        (2, 1),
        (3, 1),
        (1, 2),
        (4, 1),
        (2, 2),
        (5, 1),
        (3, 2),
    ]
    assert collector.marked == [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)]


def test_explicit_step_once_per_epoch_does_not_stop_optimizer_steps():
    collector = FakeCollector()
    clock = StepClock(collector)
    adam = Optimizer()
    for epoch in range(3):
        for _ in range(10):
            optimizer_step(clock, adam)
        clock.explicit_step()
    optimizer_steps = [t for t in collector.all_marks if t[1] == 1]
    assert len(optimizer_steps) == 30
    # only the first optimizer step after each epoch mark does not pace
    assert sum(1 for t in optimizer_steps if t[3]) == 30 - 2


def test_dataloader_batches_pace_only_where_no_optimizer_steps():
    collector = FakeCollector()
    clock = StepClock(collector)
    adam = Optimizer()
    for _ in range(5):  # training: a batch, then the optimizer's step
        clock.dataloader_batch(1)
        optimizer_step(clock, adam)
    for _ in range(4):  # evaluation: batches of another loader only
        clock.dataloader_batch(2)
    training = [t for t in collector.all_marks if t[1] == 4 and t[2] == 1]
    evaluation = [t for t in collector.all_marks if t[1] == 4 and t[2] == 2]
    assert [t[3] for t in training] == [1, 0, 0, 0, 0]  # only before the first step
    assert [t[3] for t in evaluation] == [0, 1, 1, 1]  # an optimizer step came before the first


def test_clock_without_collector_does_nothing():
    clock = StepClock(None)
    optimizer_step(clock, Optimizer())
    clock.explicit_step()
    assert clock.step == 0


def test_failing_sampler_is_turned_off_and_said_once(capsys):
    collector = FakeCollector()
    clock = StepClock(collector)

    class BrokenSampler:
        calls = 0

        def on_step(self):
            BrokenSampler.calls += 1
            raise RuntimeError("no device")

    clock.sampler = BrokenSampler()
    for _ in range(3):
        clock.explicit_step()
    assert BrokenSampler.calls == 1
    assert clock.sampler is None
    assert len(collector.marked) == 3
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("gpuleak:")]
    assert len(lines) == 1 and "no device" in lines[0]


# ---- in a real traced child process --------------------------------------------

TRAIN = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
{optimizers}
for iteration in range({iterations}):
{body}
print("steps done")
leave_traced_program()
"""


def test_optimizer_steps_of_a_real_training_loop_are_marked(run_traced):
    program = TRAIN.format(
        optimizers="opt = torch.optim.SGD(model.parameters(), lr=0.01)",
        iterations=7,
        body="    loss = model(torch.randn(8, 4)).pow(2).mean()\n" "    opt.zero_grad(); loss.backward(); opt.step()",
    )
    run = run_traced(program)
    assert run.returncode == 0, run.stderr
    assert "steps done" in run.stdout
    steps = run.steps()
    assert [s["step"] for s in steps] == list(range(1, 8))
    assert all(s["source"] == 1 for s in steps)
    assert run.gpuleak_lines() == []


def test_two_optimizers_in_a_real_loop_mark_one_step_per_iteration(run_traced):
    program = TRAIN.format(
        optimizers="d_opt = torch.optim.Adam(model.parameters(), lr=0.01)\n"
        "generator = torch.nn.Linear(4, 4)\n"
        "g_opt = torch.optim.SGD(generator.parameters(), lr=0.01)",
        iterations=6,
        body="    d_loss = model(torch.randn(8, 4)).mean()\n"
        "    d_opt.zero_grad(); d_loss.backward(); d_opt.step()\n"
        "    g_loss = model(generator(torch.randn(8, 4))).mean()\n"
        "    g_opt.zero_grad(); g_loss.backward(); g_opt.step()",
    )
    run = run_traced(program)
    assert run.returncode == 0, run.stderr
    assert [s["step"] for s in run.steps()] == list(range(1, 7))


def test_explicit_gpuleak_step_and_optimizer_steps_are_both_marked(run_traced):
    program = TRAIN.format(
        optimizers="import gpuleak\nopt = torch.optim.SGD(model.parameters(), lr=0.01)",
        iterations=4,
        body="    for micro in range(3):\n"
        "        loss = model(torch.randn(8, 4)).pow(2).mean()\n"
        "        opt.zero_grad(); loss.backward(); opt.step()\n"
        "    gpuleak.step()\n"
        "    assert gpuleak.is_recording()",
    )
    run = run_traced(program)
    assert run.returncode == 0, run.stderr
    steps = [(s["step"], s["source"]) for s in run.steps()]
    # gpuleak.step() no longer turns optimizer steps off: the analysis decides
    # which clock's steps count (explicit ones, where there are any).
    expected = []
    for i in range(4):
        expected += [(3 * i + 1, 1), (3 * i + 2, 1), (3 * i + 3, 1), (i + 1, 2)]
    assert steps == expected


def test_dataloader_batches_mark_steps_of_a_clock_per_dataset(run_traced):
    run = run_traced(
        """
import torch
from torch.utils.data import DataLoader, TensorDataset
train = DataLoader(TensorDataset(torch.randn(12, 4)), batch_size=4)
val = DataLoader(TensorDataset(torch.randn(8, 4), torch.zeros(8)), batch_size=2)
for _ in range(2):
    for (x,) in train:
        pass
for x, y in val:
    pass
print("loaders done")
leave_traced_program()
"""
    )
    assert run.returncode == 0, run.stderr
    assert "loaders done" in run.stdout
    marks = [(s["source"], s["clock"], s["step"]) for s in run.steps()]
    assert marks == [(4, 1, n) for n in range(1, 7)] + [(4, 2, n) for n in range(1, 5)]
    clocks = run.annotations("iteration_clock")
    assert [(c["source"], c["clock"]) for c in clocks] == [(4, 1), (4, 2)]
    assert all("TensorDataset" in c["description"] for c in clocks)
    assert run.gpuleak_lines() == []


def test_phases_named_by_the_program_are_marked_in_order(run_traced):
    run = run_traced(
        """
import gpuleak
with gpuleak.phase("eval"):
    with gpuleak.phase("eval/detail"):
        pass
gpuleak.begin_phase("train")
gpuleak.end_phase()
gpuleak.end_phase()  # nothing begun: no mark, no error
@gpuleak.phase("decorated")
def f():
    return 7
assert f() == 7
leave_traced_program()
"""
    )
    assert run.returncode == 0, run.stderr
    marks = [(p["name"], p["event"]) for p in run.annotations("phase")]
    assert marks == [
        ("eval", "begin"),
        ("eval/detail", "begin"),
        ("eval/detail", "end"),
        ("eval", "begin"),
        ("eval", "end"),
        ("train", "begin"),
        ("train", "end"),
        ("decorated", "begin"),
        ("decorated", "end"),
    ]


def test_annotate_records_json_in_the_trace(run_traced):
    run = run_traced(
        """
        import gpuleak
        assert gpuleak.annotate("run_config", {"lr": 0.1, "layers": [1, 2]}) is True
        leave_traced_program()
    """
    )
    assert run.returncode == 0, run.stderr
    assert run.annotations("run_config") == [{"lr": 0.1, "layers": [1, 2]}]


def test_public_api_is_a_no_op_outside_gpuleak_run(tmp_path):
    import os
    import subprocess
    from conftest import PACKAGE_DIR, PYTHON

    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEAK_")}
    env["PYTHONPATH"] = PACKAGE_DIR
    result = subprocess.run(
        [PYTHON, "-c", "import gpuleak; gpuleak.step(); " "print(gpuleak.is_recording(), gpuleak.annotate('k', 1))"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False False"
    assert "gpuleak:" not in result.stderr


def test_step_boundary_costs_microseconds(collector_path):
    # Measured 1.6 us per step on the CI-like machine (docs/python.md); the
    # bound is generous so that only a real regression (a syscall or an
    # allocation too many per step) fails it.
    import os
    import subprocess
    from conftest import PYTHON, build_dir

    here = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run(
        [PYTHON, os.path.join(here, "measure_step_cost.py")],
        env=dict(os.environ, GPULEAK_BUILD_DIR=build_dir()),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    costs = {line.split()[0]: float(line.split()[1]) for line in result.stdout.splitlines() if line.endswith("us/step")}
    assert costs["hook_only"] < 25.0, result.stdout
    assert costs["with_sampler"] < 30.0, result.stdout
