"""JAX: what its allocator hides, said in the trace, and its pool's usage sampled.

JAX (XLA) preallocates a large share of the device at start
(XLA_PYTHON_CLIENT_PREALLOCATE, on by default) and hands arrays out of that
block itself, so the driver sees one allocation and nothing inside it. With
XLA_PYTHON_CLIENT_ALLOCATOR=platform every buffer is a driver allocation
(and XLA_PYTHON_CLIENT_PREALLOCATE=false alone makes the pool grow on
demand, still in large chunks). Without patching JAX, this module

  * writes a `framework_tracking` annotation saying which of these applies;
    when arrays are hidden the report says so and names the settings that
    show them (docs/client-matrix.md);
  * samples the device's allocator statistics (Device.memory_stats():
    bytes_in_use, bytes_reserved/bytes_limit) from a daemon thread, as pool
    used/reserved bytes (trace metrics 5/4), so growth inside the
    preallocated block shows over time;
  * when arrays are hidden, also reads bytes_in_use at each step boundary
    that paces the program (PoolReader: the main script's loop, python_loop.py,
    where nothing better marks steps), at most once per millisecond: a jitted
    loop runs 200 steps in about 0.1 s, far too fast for the thread, and the
    analysis judges the pool's level per iteration (src/analysis,
    pool_judged).

Array-level stacks for JAX (jax.profiler.device_memory_profile keeps each live
buffer's traceback) are not recorded yet. `install` never raises.
"""

import json
import os
import threading
import time

from gpuleak import _collector
from gpuleak._notice import say_once
from gpuleak._vocabulary import POOL_SITE_ID

HOW_TO_SEE = "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform"


def allocator_mode(environ):
    """(mode, hidden): how JAX's GPU allocator was configured, from its documented settings."""
    allocator = environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "").strip().lower()
    if allocator == "platform":
        return "platform", False
    preallocate = environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").strip().lower()
    if preallocate in ("false", "0", "no"):
        return "pool-on-demand", True
    return "preallocated-pool", True


def tracking_annotation(environ):
    mode, hidden = allocator_mode(environ)
    # With the platform allocator JAX's device memory (a driver allocation per
    # buffer, or virtual-memory granules it maps buffers into: seen on the
    # H200 with JAX 0.11) holds its arrays only: what grows there is arrays
    # kept alive, not memory outside the framework.
    value = {
        "framework": "JAX",
        "mode": mode,
        "hidden_allocations": hidden,
        "device_memory_holds_arrays": mode == "platform",
    }
    if hidden:
        value["how_to_see"] = HOW_TO_SEE
    fraction = environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    if fraction:
        value["mem_fraction"] = fraction
    return value


def first_gpu(jax):
    """The first GPU device, or None; never initializes JAX's backends itself."""
    bridge = getattr(getattr(getattr(jax, "_src", None), "xla_bridge", None), "backends_are_initialized", None)
    if bridge is not None and not bridge():
        return None  # asking for devices now would start the backends early
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    return gpus[0] if gpus else None


def record_pool(device, collector):
    """Records the device's bytes in use (and reserved, when it says) as pool samples;
    returns the bytes in use, or None."""
    stats = device.memory_stats() or {}
    used = stats.get("bytes_in_use")
    reserved = stats.get("bytes_reserved") or stats.get("bytes_limit")
    index = getattr(device, "id", 0)
    if used is not None:
        collector.record_sample(_collector.METRIC_POOL_USED_BYTES, index, int(used))
    if reserved is not None:
        collector.record_sample(_collector.METRIC_POOL_RESERVED_BYTES, index, int(reserved))
    return None if used is None else int(used)


def _holder_requests():
    """The process's HolderRequests (GPULEAK_HOLDER_REQUESTS=1, set by `gpuleak run`), or None."""
    from gpuleak import _runtime

    return _runtime.clock().holder_requests


class PoolReader:
    """The pool's bytes in use at step boundaries (StepClock.pool_reader), at most every
    `interval_s`: memory_stats() builds a dict of a dozen entries (microseconds).

    It also asks for the holder of what fills the pool, once (the driver sees
    no array, so the collector's live index never makes a candidate): when
    the pool has risen at STREAK reads in a row, the arrays that appeared
    since it had risen at STREAK // 2 (up to 64 of them, by
    unsafe_buffer_pointer and nbytes) are walked for, as the pool's site
    (POOL_SITE_ID), in the forked walk of _forked_walk.py. `requests()`
    gives the step clock's HolderRequests, or None (no `gpuleak run`)."""

    STREAK = 8
    MAX_ARRAYS = 64

    def __init__(self, jax, collector, interval_s=0.001, clock=time.perf_counter, requests=None):
        self.jax, self.collector, self.interval_s, self.clock = jax, collector, interval_s, clock
        self.requests = requests if requests is not None else _holder_requests
        self.device = None
        self.next_s = 0.0
        self.last_used = None
        self.rises = 0
        self.before = None  # array ranges live when the pool had risen STREAK // 2 times
        self.asked = False

    def on_step(self):
        now = self.clock()
        if now < self.next_s:
            return
        self.next_s = now + self.interval_s
        if self.device is None:
            self.device = first_gpu(self.jax)
            if self.device is None:
                return
        used = record_pool(self.device, self.collector)
        if used is None or self.asked:
            return
        self.rises = self.rises + 1 if self.last_used is not None and used > self.last_used else 0
        self.last_used = used
        if self.rises == self.STREAK // 2 and self.before is None:
            self.before = set(self.array_ranges())
        elif self.rises >= self.STREAK and self.before is not None:
            self.asked = True
            self.ask_for_holder()

    def array_ranges(self):
        """[start, size] of every live single-device JAX array."""
        from gpuleak.holders.array_scan import array_range, live_arrays

        listed = getattr(self.jax, "live_arrays", None)
        arrays = listed() if listed is not None else live_arrays((self.jax.Array,))
        ranges = []
        for array in arrays:
            span = array_range(array)
            if span is not None:
                ranges.append((span[0], span[1] - span[0]))
        return ranges

    def ask_for_holder(self):
        requests = self.requests()
        if requests is None:
            return
        new = [list(r) for r in self.array_ranges() if r not in self.before][: self.MAX_ARRAYS]
        self.before = None
        if new:
            requests.answer_candidates([(POOL_SITE_ID, new)])


class PoolSampler(threading.Thread):
    """Reads memory_stats() of the first GPU every interval_s and records it."""

    def __init__(self, jax, collector, interval_s):
        super().__init__(name="gpuleak-jax-pool", daemon=True)
        self.jax, self.collector, self.interval_s = jax, collector, interval_s

    def run(self):
        device = None
        while True:
            time.sleep(self.interval_s)
            try:
                if device is None:
                    gpus = [d for d in self.jax.devices() if d.platform == "gpu"]
                    if not gpus:
                        return
                    device = gpus[0]
                # With the platform allocator memory_stats() may say nothing:
                # the set-up annotation must not wait for a sample then.
                self.collector.write_waiting_annotations()
                record_pool(device, self.collector)
            except Exception as error:
                say_once("jax-pool", "sampling JAX's memory pool failed (%s)" % error)
                return


_installed = False


def install(jax, collector, environ=None):
    """Annotates the allocator mode and starts the pool sampler, once."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        environ = os.environ if environ is None else environ
        tracking = tracking_annotation(environ)
        collector.annotate("framework_tracking", json.dumps(tracking))
        interval_ms = float(environ.get("GPULEAK_DEVICE_SAMPLE_MS", "500"))
        if interval_ms > 0:
            PoolSampler(jax, collector, interval_ms / 1000.0).start()
        if tracking["hidden_allocations"]:
            from gpuleak import _runtime

            step_ms = float(environ.get("GPULEAK_POOL_STEP_SAMPLE_MS", "1"))
            _runtime.clock().pool_reader = PoolReader(jax, collector, max(step_ms, 0.0) / 1000.0)
    except Exception as error:
        say_once("jax-setup", "JAX tracking is off (%s)" % error)
