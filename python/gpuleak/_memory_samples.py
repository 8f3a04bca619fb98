"""Memory samples at step boundaries: what PyTorch and the device say.

Recorded through gpuleak_record_sample (metric ids in src/trace/records.h):
  6/7  torch allocated / reserved bytes of the current device (its caching
       allocator statistics, read from torch._C._cuda_memoryStats without
       building the flat dict torch.cuda.memory_stats() returns);
  5/4  pool used / reserved, the same statistics when the cudaMallocAsync
       backend is in use (torch reads them from the pool's attributes);
  2/3  device used / total bytes (cudaMemGetInfo through torch.cuda.mem_get_info).
Host RSS is sampled by the collector itself.

None of these synchronizes the GPU, and none is made while the current stream
is capturing a CUDA graph (a step of a capturable optimizer inside
torch.cuda.graph), where cudaMemGetInfo could invalidate the capture. The
allocator statistics build a dict of ~150 entries (tens of microseconds), so
they are taken at most every
`torch_interval_s` (50 ms), and device info at most every
`device_interval_s` (0.5 s): the cost stays under ~0.1% of any loop.
"""

import os
import time

from gpuleak import _collector


def _interval_from_environment(name, default_s):
    try:
        return max(0.0, float(os.environ[name]) / 1000.0)
    except (KeyError, ValueError):
        return default_s


class MemorySampler:
    def __init__(
        self, torch, collector, pool_backend, torch_interval_s=None, device_interval_s=None, clock=time.monotonic
    ):
        self.cuda = torch.cuda
        self.read_stats = getattr(torch._C, "_cuda_memoryStats", None)
        self.capturing = getattr(torch.cuda, "is_current_stream_capturing", None)
        self.record = collector.record_sample
        self.pool_backend = pool_backend
        self.torch_interval_s = (
            _interval_from_environment("GPULEAK_SAMPLE_MS", 0.05) if torch_interval_s is None else torch_interval_s
        )
        self.device_interval_s = (
            _interval_from_environment("GPULEAK_DEVICE_SAMPLE_MS", 0.5)
            if device_interval_s is None
            else device_interval_s
        )
        self.clock = clock
        self.next_torch_sample = 0.0
        self.next_device_sample = 0.0

    def on_step(self):
        now = self.clock()
        if now < self.next_torch_sample and now < self.next_device_sample:
            return
        if self.capturing is not None and self.capturing():
            return  # inside a CUDA graph capture (capturable optimizers): make no CUDA call
        device = self.cuda.current_device()
        if now >= self.next_torch_sample:
            self.next_torch_sample = now + self.torch_interval_s
            self.sample_allocator(device)
        if now >= self.next_device_sample:
            self.next_device_sample = now + self.device_interval_s
            free_bytes, total_bytes = self.cuda.mem_get_info(device)
            self.record(_collector.METRIC_DEVICE_USED_BYTES, device, total_bytes - free_bytes)
            self.record(_collector.METRIC_DEVICE_TOTAL_BYTES, device, total_bytes)

    def sample_allocator(self, device):
        if self.read_stats is not None:
            stats = self.read_stats(device)
            allocated = stats["allocated_bytes"]["all"]["current"]
            reserved = stats["reserved_bytes"]["all"]["current"]
        else:
            allocated = self.cuda.memory_allocated(device)
            reserved = self.cuda.memory_reserved(device)
        self.record(_collector.METRIC_TORCH_ALLOCATED_BYTES, device, allocated)
        self.record(_collector.METRIC_TORCH_RESERVED_BYTES, device, reserved)
        if self.pool_backend:
            self.record(_collector.METRIC_POOL_USED_BYTES, device, allocated)
            self.record(_collector.METRIC_POOL_RESERVED_BYTES, device, reserved)
