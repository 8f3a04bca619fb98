"""Holders found in the process itself: the collector notices a site whose
live tensors grew at 8 consecutive steps, and the package walks the heap at
that step boundary, without waiting for a request from `gpuleak run` (which
comes too late for a short job)."""


LEAKING = """
import ctypes, collections, torch
released = ctypes.CDLL(_os.environ["GPULEAK_COLLECTOR"])
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
%s
def keep(step):
    t = torch.full((1024,), float(step))
    released.gpuleak_record_torch_alloc(ctypes.c_uint64(t.data_ptr()), ctypes.c_uint64(4096), 0, ctypes.c_uint64(0))
    kept.append(t)

for step in range(30):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    keep(step)
leave_traced_program()
"""


def holder_sites(run):
    sites = []
    for answer in run.annotations("holder"):
        assert str(answer["request_id"]).startswith("in-process"), answer
        sites.extend(answer["sites"])
    return sites


def test_a_list_that_grows_every_step_is_named_in_the_process(run_traced):
    run = run_traced(LEAKING % "kept = []", extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"})
    assert run.returncode == 0, run.stderr
    sites = holder_sites(run)
    assert len(sites) == 1, sites
    assert sites[0]["kind"] == "tensor"
    assert sites[0]["holder"]["type"] == "list"
    assert sites[0]["holder"]["name"] == "kept"
    assert sites[0]["holder"]["owner"] == "module __main__"


def test_a_bounded_deque_is_named_bounded(run_traced):
    run = run_traced(
        LEAKING % "kept = collections.deque(maxlen=20)",
        extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"},
    )
    assert run.returncode == 0, run.stderr
    sites = holder_sites(run)
    assert len(sites) == 1, sites
    assert sites[0]["holder"]["type"] == "deque"
    assert sites[0]["holder"]["bounded"] is True
    assert sites[0]["holder"]["maxlen"] == 20


def test_nothing_is_walked_without_holder_requests_enabled(run_traced):
    run = run_traced(LEAKING % "kept = []", extra_env={"GPULEAK_HOLDER_REQUESTS": "0", "GPULEAK_TORCH_MODE": "off"})
    assert run.returncode == 0, run.stderr
    assert run.annotations("holder") == []


def test_a_site_that_does_not_grow_every_step_is_walked_once_at_exit(run_traced):
    # Not a candidate while the program runs (its growth is never 8 steps in a row), but
    # it grew at 15 of 30 steps: one walk at exit names its holder.
    program = (LEAKING % "kept = []").replace("    keep(step)", "    if step % 2 == 0:\n        keep(step)")
    program = program.replace(
        "leave_traced_program()", "import atexit\natexit._run_exitfuncs()\nleave_traced_program()"
    )
    run = run_traced(program, extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"})
    assert run.returncode == 0, run.stderr
    answers = run.annotations("holder")
    assert [a["request_id"] for a in answers] == ["at-exit"], answers
    [site] = answers[0]["sites"]
    assert site["holder"]["name"] == "kept", site


# The depth corpus's leak_exception_kept_for_report in a short run on the CPU: every other
# batch fails inside forward() and the loop keeps the exception, whose traceback keeps
# forward()'s frame and its tensors. Six optimizer steps: too few for a candidate while it runs.
EXCEPTIONS_KEPT = """
import ctypes, sys, weakref, torch
collector = ctypes.CDLL(_os.environ["GPULEAK_COLLECTOR"])

def gpu(t):
    collector.gpuleak_record_torch_alloc(ctypes.c_uint64(t.data_ptr()), ctypes.c_uint64(t.numel() * 4), 0, ctypes.c_uint64(0))
    freed = weakref.finalize(t, collector.gpuleak_record_torch_free, ctypes.c_uint64(t.data_ptr()), 0)
    freed.atexit = False  # as a GPU tensor, it is not freed at exit
    return t

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 256)
        self.down = torch.nn.Linear(256, 64)

    def forward(self, x, too_long):
        hidden = gpu(torch.relu(self.up(x)))
        if too_long:
            raise RuntimeError("CUDA out of memory (simulated)")
        return self.down(hidden)

def main():
    model = Encoder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    skipped = []
    for step in range(12):
        x = gpu(torch.randn(16, 64))
        try:
            loss = model(x, too_long=step % 2 == 1).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        except RuntimeError as error:
            optimizer.zero_grad(set_to_none=True)
            skipped.append(error)  # the keeping line
    print("steps=12 skipped=%d" % len(skipped))

main()
# What Python does at exit (leave_traced_program's os._exit would skip it).
import atexit
atexit._run_exitfuncs()
leave_traced_program()
"""


def test_exceptions_kept_in_a_short_run_are_walked_at_exit(run_traced):
    run = run_traced(EXCEPTIONS_KEPT, extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"})
    assert run.returncode == 0, run.stderr
    assert "steps=12 skipped=6" in run.stdout
    answers = run.annotations("holder")
    assert [a["request_id"] for a in answers] == ["at-exit"], answers
    sites = answers[0]["sites"]
    assert len(sites) == 2, sites  # x, and forward()'s activation
    for site in sites:
        # main() has returned: its frame lives on in the kept exceptions' tracebacks.
        holder = site["holder"]
        assert holder is not None, site
        assert holder["name"].startswith("skipped["), holder
        assert holder["kept_at"]["statement"].startswith("skipped.append(error)"), holder
        assert holder["kept_at"]["function"] == "main"
        assert site["cause"] == "exception-traceback", site
        assert "str(e)" in site["fix"]


def test_the_exit_walk_changes_nothing_the_program_prints(run_traced):
    run = run_traced(EXCEPTIONS_KEPT, extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines() == ["steps=12 skipped=6"]
    assert run.gpuleak_lines() == []
