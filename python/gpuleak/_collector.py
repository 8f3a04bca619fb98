"""The collector's C API (include/gpuleak/collector_api.h) through ctypes.

The library is `GPULEAK_COLLECTOR`, loaded with PyDLL so the GIL stays held
during each call: allocations recorded from Python then carry Python stacks.
If the CUDA driver already loaded it through CUDA_INJECTION64_PATH, dlopen
returns the same handle, so the package and the driver share one recorder.

Every function here is safe when no collector is configured: `load()`
returns None and callers skip their work.
"""

import os

from gpuleak._notice import say_once

# The ids passed to the C API are the vocabulary's (include/gpuleak/vocabulary.h).
from gpuleak._vocabulary import (  # noqa: F401 (re-exported for the package's modules)
    FRAMEWORK_CUPY,
    FRAMEWORK_JAX,
    METRIC_DEVICE_TOTAL_BYTES,
    METRIC_DEVICE_USED_BYTES,
    METRIC_HOST_RSS_BYTES,
    METRIC_POOL_RESERVED_BYTES,
    METRIC_POOL_USED_BYTES,
    METRIC_TORCH_ALLOCATED_BYTES,
    METRIC_TORCH_RESERVED_BYTES,
    STEP_FROM_DATALOADER,
    STEP_FROM_EXPLICIT,
    STEP_FROM_OPTIMIZER_HOOK,
    STEP_FROM_PYTHON_LOOP,
)


class Collector:
    """Typed entry points of one loaded collector library."""

    def __init__(self, library):
        import ctypes

        self.library = library
        u64, i32, text = ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p

        def entry(name, argtypes, restype=None):
            function = getattr(library, name)
            function.argtypes = argtypes
            function.restype = restype
            return function

        self.is_recording = entry("gpuleak_is_recording", [], i32)
        self.start_recording = entry("gpuleak_start_recording", [], i32)
        self.mark_step = entry("gpuleak_mark_step", [u64, i32])
        try:  # collectors before clocks had one clock per source
            self.mark_clock_step = entry("gpuleak_mark_clock_step", [u64, i32, ctypes.c_uint32, i32])
        except AttributeError:
            self.mark_clock_step = lambda step, source, clock, pacing: self.mark_step(step, source)
        self._record_sample = entry("gpuleak_record_sample", [i32, i32, u64])
        self._annotate = entry("gpuleak_annotate", [text, text])
        # Annotations made before the recorder started (JAX and CuPy are set
        # up at import, before the program's first CUDA call starts it) wait
        # here and are written by the first annotation or sample after it did;
        # so do those made before the library was loaded (_startup_annotations).
        from gpuleak import _startup_annotations

        self._waiting_annotations = [
            (key.encode("utf-8"), value.encode("utf-8", "replace")) for key, value in _startup_annotations.take()
        ]
        self.flush = entry("gpuleak_flush", [])
        try:  # older collectors have no array events
            self._record_array_alloc = entry("gpuleak_record_array_alloc", [u64, u64, i32, u64, i32])
            self.record_array_free = entry("gpuleak_record_array_free", [u64, i32, i32])
        except AttributeError:
            self._record_array_alloc = self.record_array_free = lambda *args: None
        try:  # older collectors have no growth candidates
            self._take_candidates = entry(
                "gpuleak_take_growth_candidates",
                [
                    ctypes.POINTER(ctypes.c_uint32),
                    ctypes.POINTER(ctypes.c_uint32),
                    ctypes.POINTER(ctypes.c_uint64),
                    i32,
                    i32,
                ],
                i32,
            )
        except AttributeError:
            self._take_candidates = None
        self._candidate_buffers = None
        self._mark_growth_boundary = None
        # gpuleak_growth_tick is the first name of gpuleak_mark_growth_boundary,
        # the one collectors built before the rename export; older ones still
        # judge growth at steps only.
        for name in ("gpuleak_mark_growth_boundary", "gpuleak_growth_tick"):
            try:
                self._mark_growth_boundary = entry(name, [i32])
                break
            except AttributeError:
                pass
        try:  # older collectors have no candidates at exit
            self._candidates_at_exit = entry("gpuleak_growth_candidates_at_exit", [])
        except AttributeError:
            self._candidates_at_exit = None

    def mark_growth_boundary(self, index_driver_allocations):
        """A step boundary of the live index without a step (see gpuleak_mark_growth_boundary);
        False if unsupported."""
        if self._mark_growth_boundary is None:
            return False
        self._mark_growth_boundary(1 if index_driver_allocations else 0)
        return True

    def growth_candidates_at_exit(self):
        """Sites that grew at several steps, not in a row, made candidates (the program ends
        before any was walked); take them with take_growth_candidates(). False if unsupported."""
        if self._candidates_at_exit is None:
            return False
        self._candidates_at_exit()
        return True

    def take_growth_candidates(self, max_sites=16, max_allocations=64):
        """Sites that grew at 8 consecutive step boundaries (with or without a step):
        [(site_id, [[address, size], ...])]."""
        if self._take_candidates is None:
            return []
        import ctypes

        if self._candidate_buffers is None:
            self._candidate_buffers = (
                (ctypes.c_uint32 * max_sites)(),
                (ctypes.c_uint32 * max_sites)(),
                (ctypes.c_uint64 * (max_sites * max_allocations * 2))(),
            )
        ids, counts, allocations = self._candidate_buffers
        found = self._take_candidates(ids, counts, allocations, max_sites, max_allocations)
        sites = []
        for i in range(found):
            base = i * max_allocations * 2
            pairs = [[allocations[base + 2 * j], allocations[base + 2 * j + 1]] for j in range(counts[i])]
            sites.append((ids[i], pairs))
        return sites

    def annotate(self, key, value_json):
        entry = (key.encode("utf-8"), value_json.encode("utf-8", "replace"))
        if not self.is_recording():
            if len(self._waiting_annotations) < MAX_WAITING_ANNOTATIONS:
                self._waiting_annotations.append(entry)
            return
        if self._waiting_annotations:
            self.write_waiting_annotations()
        self._annotate(*entry)

    def record_sample(self, metric, device, value):
        if self._waiting_annotations:
            self.write_waiting_annotations()
        self._record_sample(metric, device, value)

    def record_array_alloc(self, address, size, device, stream, framework):
        # The first array CuPy hands out comes after the recorder started.
        if self._waiting_annotations:
            self.write_waiting_annotations()
        self._record_array_alloc(address, size, device, stream, framework)

    def write_waiting_annotations(self):
        """Writes the annotations made before the recorder started, once it has."""
        if not self._waiting_annotations or not self.is_recording():
            return
        waiting, self._waiting_annotations = self._waiting_annotations, []
        for entry in waiting:
            self._annotate(*entry)


# Annotations kept while the recorder has not started (a handful are made at
# import time; more would mean something annotates in a loop).
MAX_WAITING_ANNOTATIONS = 64


_loaded = None
_load_tried = False


def loaded_in_process():
    """Whether the collector is in the process already (the CUDA driver's injection, or
    the package), without loading it: RTLD_NOLOAD. Loads the package's handle then."""
    if _loaded is not None or _load_tried:
        return _loaded is not None
    path = os.environ.get("GPULEAK_COLLECTOR")
    if not path:
        return False
    try:
        import ctypes

        ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except (OSError, AttributeError):
        return False
    return load() is not None


def load():
    """The collector named by GPULEAK_COLLECTOR, or None (not configured or unloadable)."""
    global _loaded, _load_tried
    if _load_tried:
        return _loaded
    _load_tried = True
    path = os.environ.get("GPULEAK_COLLECTOR")
    if not path:
        return None
    try:
        import ctypes

        _loaded = Collector(ctypes.PyDLL(path))
    except Exception as error:
        say_once("collector-load", "cannot load the collector %s (%s); gpuleak is off in this process" % (path, error))
        _loaded = None
    return _loaded
