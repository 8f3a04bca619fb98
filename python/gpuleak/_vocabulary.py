"""gpuleak's vocabulary on the Python side: the ids this package passes to
the collector's C API (ctypes passes plain ints) and the cause names users
read. The definitions are include/gpuleak/vocabulary.h's; these are the same
values, and tests/vocabulary/ fails when the two (or the docs) disagree."""

# What a sample measures: gpuleak_record_sample's `metric` (GPULEAK_METRICS).
METRIC_HOST_RSS_BYTES = 1
METRIC_DEVICE_USED_BYTES = 2
METRIC_DEVICE_TOTAL_BYTES = 3
METRIC_POOL_RESERVED_BYTES = 4
METRIC_POOL_USED_BYTES = 5
METRIC_TORCH_ALLOCATED_BYTES = 6
METRIC_TORCH_RESERVED_BYTES = 7

# What ended a step: gpuleak_mark_step's `source` (GPULEAK_STEP_SOURCES).
# ALLOCATION_PERIOD is the analysis's own and never passed from here.
STEP_FROM_OPTIMIZER_HOOK = 1
STEP_FROM_EXPLICIT = 2
STEP_FROM_TIME_WINDOW = 3
STEP_FROM_DATALOADER = 4
STEP_FROM_ALLOCATION_PERIOD = 5
STEP_FROM_PYTHON_LOOP = 6

# The site id of a framework pool's bytes in use (GPULEAK_POOL_SITE_ID): what
# a holder answer about the arrays inside JAX's preallocated pool is for.
POOL_SITE_ID = 0xFFFFFFFF

# Whose pool an array block is from: gpuleak_record_array_alloc's
# `framework` (GPULEAK_FRAMEWORKS).
FRAMEWORK_CUPY = 1
FRAMEWORK_JAX = 2

# The causes users read (GPULEAK_CAUSES): slug -> title.
CAUSES = {
    "tensors-kept-alive": "tensors kept alive",
    "autograd-graph-kept-alive": "autograd graph kept alive",
    "dataloader-workers-with-cuda": "DataLoader workers with CUDA",
    "contexts-left-behind": "CUDA contexts left behind",
    "non-tensor-driver-allocations": "driver allocations outside the tensor allocator",
    "library-handles-never-destroyed": "library handles never destroyed",
    "device-buffers-never-freed": "device buffers never freed",
    "bounded-growth": "growth that stops at a bound",
    "ineffective-fix": "ineffective fix, frees nothing leaked",
    "raises-at-runtime": "raises at run time",
    "correctness-not-a-leak": "correctness bug, not a leak",
}

# How a holder keeps memory (the holder walk's `cause`, docs/python.md): a
# finer word under one of the causes above, which the report's verdict names.
HOLDING_CAUSE = {
    "graph-in-container": "autograd-graph-kept-alive",
    "graph-accumulated": "autograd-graph-kept-alive",
    "autograd-cycle": "autograd-graph-kept-alive",
    "tensor-container": "tensors-kept-alive",
    "view-keeps-base": "tensors-kept-alive",
    "library-keeps-prepared": "tensors-kept-alive",
    "metric-state-not-reset": "tensors-kept-alive",
    "cache-by-step": "tensors-kept-alive",
    "bounded-container": "bounded-growth",
    "forward-hook": "tensors-kept-alive",
    "exception-traceback": "tensors-kept-alive",
    "hooks-registered-repeatedly": "tensors-kept-alive",
    "unbounded-cache": "tensors-kept-alive",
    "optimizer-state": "tensors-kept-alive",
    "cuda-graph-per-shape": "tensors-kept-alive",
    "single-reference": "tensors-kept-alive",
}
