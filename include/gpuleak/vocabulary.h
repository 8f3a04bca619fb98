/* gpuleak's vocabulary: the ids that cross from Python (python/gpuleak) into
 * the collector's C API and the trace, and the cause names users read in
 * every output. Each is defined here once:
 *
 *   - C and C++ code uses the macros and lists below (trace::Metric and
 *     trace::StepSource take their values from them; lint and the analysis
 *     take their cause names from GPULEAK_CAUSES);
 *   - the Python package keeps the same ids in python/gpuleak/_vocabulary.py
 *     (ctypes passes plain ints), and tests/vocabulary/ checks that both, and
 *     the docs that list them, agree with this file.
 *
 * Values are stable: they are stored in trace files. A new entry takes a new
 * number; a number is never reused.
 *
 * Each list is an X-macro: X(NAME, value-or-slug, ...). */
#ifndef GPULEAK_VOCABULARY_H_
#define GPULEAK_VOCABULARY_H_

/* What a sample measures (gpuleak_record_sample's `metric`, trace::Metric).
 * X(NAME, id, name as docs/trace-format.md and the JSON report spell it) */
#define GPULEAK_METRICS(X)                             \
  X(HOST_RSS_BYTES, 1, "host_rss_bytes")               \
  X(DEVICE_USED_BYTES, 2, "device_used_bytes")         \
  X(DEVICE_TOTAL_BYTES, 3, "device_total_bytes")       \
  X(POOL_RESERVED_BYTES, 4, "pool_reserved_bytes")     \
  X(POOL_USED_BYTES, 5, "pool_used_bytes")             \
  X(TORCH_ALLOCATED_BYTES, 6, "torch_allocated_bytes") \
  X(TORCH_RESERVED_BYTES, 7, "torch_reserved_bytes")

/* What ended a step (gpuleak_mark_step's `source`, trace::StepSource).
 * ALLOCATION_PERIOD is found by the analysis in the allocation stream and is
 * never written into a trace; PYTHON_LOOP is a back-edge of a loop in the
 * program's main script (python/gpuleak/python_loop.py).
 * X(NAME, id, name as the report's step_source) */
#define GPULEAK_STEP_SOURCES(X)                \
  X(OPTIMIZER_HOOK, 1, "optimizer-hook")       \
  X(EXPLICIT, 2, "explicit")                   \
  X(TIME_WINDOW, 3, "time-window")             \
  X(DATALOADER, 4, "dataloader")               \
  X(ALLOCATION_PERIOD, 5, "allocation-period") \
  X(PYTHON_LOOP, 6, "python-loop")

/* The site id of a framework pool's bytes in use (JAX preallocating), for
 * the holder walk's answer about the arrays that fill it: not a stack id
 * (stack ids count up from 1). */
#define GPULEAK_POOL_SITE_ID 0xffffffffu

/* Whose memory pool an array block comes from
 * (gpuleak_record_array_alloc's `framework`). X(NAME, id, name) */
#define GPULEAK_FRAMEWORKS(X) \
  X(CUPY, 1, "cupy")          \
  X(JAX, 2, "jax")

/* The causes users read: the `cause` of a growth verdict in the report
 * (text, JSON, HTML) and of a lint rule (text, JSON, SARIF). They do not
 * cross into Python as numbers, so NAME is the C++ enumerator's (kNAME).
 * X(NAME, slug, title) */
#define GPULEAK_CAUSES(X)                                                                      \
  X(TensorsKeptAlive, "tensors-kept-alive", "tensors kept alive")                              \
  X(AutogradGraphKeptAlive, "autograd-graph-kept-alive", "autograd graph kept alive")          \
  X(DataloaderWorkersWithCuda, "dataloader-workers-with-cuda", "DataLoader workers with CUDA") \
  X(ContextsLeftBehind, "contexts-left-behind", "CUDA contexts left behind")                   \
  X(NonTensorDriverAllocations, "non-tensor-driver-allocations",                               \
    "driver allocations outside the tensor allocator")                                         \
  X(LibraryHandlesNeverDestroyed, "library-handles-never-destroyed",                           \
    "library handles never destroyed")                                                         \
  X(DeviceBuffersNeverFreed, "device-buffers-never-freed", "device buffers never freed")       \
  X(BoundedGrowth, "bounded-growth", "growth that stops at a bound")                           \
  X(IneffectiveFix, "ineffective-fix", "ineffective fix, frees nothing leaked")                \
  X(RaisesAtRuntime, "raises-at-runtime", "raises at run time")                                \
  X(CorrectnessNotALeak, "correctness-not-a-leak", "correctness bug, not a leak")

/* The numeric ids as enumerators (GPULEAK_METRIC_*, GPULEAK_STEP_FROM_*,
 * GPULEAK_FRAMEWORK_*), for C callers and for trace::Metric/StepSource. */
#define GPULEAK_METRIC_ID_(NAME, ID, TEXT) GPULEAK_METRIC_##NAME = (ID),
#define GPULEAK_STEP_SOURCE_ID_(NAME, ID, TEXT) GPULEAK_STEP_FROM_##NAME = (ID),
#define GPULEAK_FRAMEWORK_ID_(NAME, ID, TEXT) GPULEAK_FRAMEWORK_##NAME = (ID),
enum gpuleak_metric_id { GPULEAK_METRICS(GPULEAK_METRIC_ID_) };
enum gpuleak_step_source_id { GPULEAK_STEP_SOURCES(GPULEAK_STEP_SOURCE_ID_) };
enum gpuleak_framework_id { GPULEAK_FRAMEWORKS(GPULEAK_FRAMEWORK_ID_) };
#undef GPULEAK_METRIC_ID_
#undef GPULEAK_STEP_SOURCE_ID_
#undef GPULEAK_FRAMEWORK_ID_

#ifdef __cplusplus
#include <string_view>

namespace gpuleak::vocabulary {

// The user-facing causes, in GPULEAK_CAUSES order.
enum class Cause {
#define GPULEAK_CAUSE_ENUM_(NAME, SLUG, TITLE) k##NAME,
  GPULEAK_CAUSES(GPULEAK_CAUSE_ENUM_)
#undef GPULEAK_CAUSE_ENUM_
};

// "autograd-graph-kept-alive": the spelling in every output.
constexpr std::string_view cause_slug(Cause cause) {
  switch (cause) {
#define GPULEAK_CAUSE_SLUG_(NAME, SLUG, TITLE) \
  case Cause::k##NAME:                         \
    return SLUG;
    GPULEAK_CAUSES(GPULEAK_CAUSE_SLUG_)
#undef GPULEAK_CAUSE_SLUG_
  }
  return "unknown";
}

// "autograd graph kept alive": the same cause in words, for headings.
constexpr std::string_view cause_title(Cause cause) {
  switch (cause) {
#define GPULEAK_CAUSE_TITLE_(NAME, SLUG, TITLE) \
  case Cause::k##NAME:                          \
    return TITLE;
    GPULEAK_CAUSES(GPULEAK_CAUSE_TITLE_)
#undef GPULEAK_CAUSE_TITLE_
  }
  return "unknown";
}

}  // namespace gpuleak::vocabulary
#endif

#endif /* GPULEAK_VOCABULARY_H_ */
