"""Holders found in the process itself: the collector notices a site whose
live tensors grew at 8 consecutive steps, and the package walks the heap at
that step boundary, without waiting for a request from `gpuleak run` (which
comes too late for a short job)."""


LEAKING = '''
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
'''


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
    run = run_traced(LEAKING % "kept = collections.deque(maxlen=20)",
                     extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"})
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


def test_a_site_that_does_not_grow_every_step_is_not_walked(run_traced):
    program = (LEAKING % "kept = []").replace("    keep(step)", "    if step % 2 == 0:\n        keep(step)")
    run = run_traced(program, extra_env={"GPULEAK_HOLDER_REQUESTS": "1", "GPULEAK_TORCH_MODE": "off"})
    assert run.returncode == 0, run.stderr
    assert run.annotations("holder") == []
