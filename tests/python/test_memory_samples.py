"""Memory samples at step boundaries: which metrics, from where, and how often."""

import types

from gpuleak._memory_samples import MemorySampler

GIB = 1 << 30


def fake_torch(allocated=100, reserved=300, free=6 * GIB, total=8 * GIB, with_stats=True):
    """A torch stand-in with the CUDA calls the sampler uses, counting them."""
    calls = {"stats": 0, "mem_get_info": 0}

    def memory_stats(device):
        calls["stats"] += 1
        return {"allocated_bytes": {"all": {"current": allocated}}, "reserved_bytes": {"all": {"current": reserved}}}

    def mem_get_info(device):
        calls["mem_get_info"] += 1
        return free, total

    cuda = types.SimpleNamespace(
        current_device=lambda: 1,
        mem_get_info=mem_get_info,
        memory_allocated=lambda device: allocated,
        memory_reserved=lambda device: reserved,
    )
    torch_c = types.SimpleNamespace(**({"_cuda_memoryStats": memory_stats} if with_stats else {}))
    return types.SimpleNamespace(cuda=cuda, _C=torch_c), calls


class Recorder:
    def __init__(self):
        self.samples = []

    def record_sample(self, metric, device, value):
        self.samples.append((metric, device, value))


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_first_step_samples_torch_and_device_memory():
    torch, _ = fake_torch()
    recorder = Recorder()
    MemorySampler(torch, recorder, pool_backend=False).on_step()
    assert sorted(recorder.samples) == [(2, 1, 2 * GIB), (3, 1, 8 * GIB), (6, 1, 100), (7, 1, 300)]


def test_pool_backend_also_records_pool_used_and_reserved():
    torch, _ = fake_torch()
    recorder = Recorder()
    MemorySampler(torch, recorder, pool_backend=True).on_step()
    assert (5, 1, 100) in recorder.samples and (4, 1, 300) in recorder.samples


def test_without_the_raw_stats_call_the_public_functions_are_used():
    torch, _ = fake_torch(with_stats=False, allocated=7, reserved=9)
    recorder = Recorder()
    MemorySampler(torch, recorder, pool_backend=False).on_step()
    assert (6, 1, 7) in recorder.samples and (7, 1, 9) in recorder.samples


def test_samples_are_rate_limited_per_kind():
    torch, calls = fake_torch()
    recorder = Recorder()
    clock = FakeClock()
    sampler = MemorySampler(
        torch, recorder, pool_backend=False, torch_interval_s=0.05, device_interval_s=0.5, clock=clock
    )
    for _ in range(1000):  # 1000 steps of 1 ms
        sampler.on_step()
        clock.now += 0.001
    assert 19 <= calls["stats"] <= 21  # one per 50 ms over 1 s
    assert 2 <= calls["mem_get_info"] <= 3  # one per 500 ms


def test_nothing_is_sampled_while_a_cuda_graph_is_being_captured():
    torch, calls = fake_torch()
    capturing = [True]
    torch.cuda.is_current_stream_capturing = lambda: capturing[0]
    recorder = Recorder()
    sampler = MemorySampler(torch, recorder, pool_backend=False)
    sampler.on_step()
    assert recorder.samples == [] and calls == {"stats": 0, "mem_get_info": 0}
    capturing[0] = False
    sampler.on_step()
    assert len(recorder.samples) == 4


def test_intervals_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPULEAK_SAMPLE_MS", "0")
    monkeypatch.setenv("GPULEAK_DEVICE_SAMPLE_MS", "250")
    torch, _ = fake_torch()
    sampler = MemorySampler(torch, Recorder(), pool_backend=False)
    assert sampler.torch_interval_s == 0.0 and sampler.device_interval_s == 0.25


def test_samples_reach_the_trace_at_step_boundaries(run_traced):
    run = run_traced(
        """
        import types
        import torch
        import gpuleak._runtime as runtime
        from gpuleak import _collector
        from gpuleak._memory_samples import MemorySampler

        # CPU-only torch: stand in for torch.cuda, keep everything else real.
        step_of_sample = []
        def stats(device):
            return {"allocated_bytes": {"all": {"current": 1000 + 10 * runtime.clock().step}},
                    "reserved_bytes": {"all": {"current": 4096}}}
        fake = types.SimpleNamespace(
            cuda=types.SimpleNamespace(current_device=lambda: 0,
                                       mem_get_info=lambda device: (3 << 30, 4 << 30)),
            _C=types.SimpleNamespace(_cuda_memoryStats=stats))
        runtime.clock().sampler = MemorySampler(fake, _collector.load(), pool_backend=False,
                                                torch_interval_s=0, device_interval_s=0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        leave_traced_program()
    """
    )
    assert run.returncode == 0, run.stderr
    records = run.records()
    allocated = [r["value"] for r in records if r["type"] == "sample" and r["metric"] == 6]
    assert allocated == [1010, 1020, 1030, 1040]
    used = [r["value"] for r in records if r["type"] == "sample" and r["metric"] == 2]
    assert used == [1 << 30] * 4
    # each step record comes right before its samples
    order = [(r["type"], r.get("metric")) for r in records if r["type"] in ("step", "sample") and r.get("metric") != 1]
    assert order[:5] == [("step", None), ("sample", 6), ("sample", 7), ("sample", 2), ("sample", 3)]
