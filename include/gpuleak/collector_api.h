/* The collector's C API, exported by libgpuleak_collector.so.
 *
 * The CUDA driver loads the collector through CUDA_INJECTION64_PATH and calls
 * InitializeInjection(); everything else here is for code running in the
 * traced process: the gpuleak Python package (through ctypes) and the
 * PyTorch allocator hook. Every function is safe to call at any time from
 * any thread, never blocks on I/O, and does nothing when the collector is
 * disabled or not recording. None of them ever raises or aborts.
 */
#ifndef GPULEAK_COLLECTOR_API_H_
#define GPULEAK_COLLECTOR_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called by the CUDA driver during cuInit. Returns 1 (the driver ignores it).
 * The name is the driver's (CUDA_INJECTION64_PATH), not ours to choose. */
int InitializeInjection(void);  // NOLINT(readability-identifier-naming)

/* Version of the collector, e.g. "0.1.0". */
const char* gpuleak_collector_version(void);

/* 1 while the collector is recording into a trace, else 0. */
int gpuleak_is_recording(void);

/* Starts the recorder without CUDA (no CUPTI subscription): for programs
 * that report steps, samples and allocator events themselves, and for tests.
 * Returns 1 if recording. Idempotent. */
int gpuleak_start_recording(void);

/* A training step ended. `source`: 1 optimizer hook, 2 explicit, 4 a
 * DataLoader batch, 6 a time round the main script's loop (python-loop;
 * trace::StepSource); anything else counts as explicit. */
void gpuleak_mark_step(uint64_t step, int source);

/* The same for one of several clocks of a source (two DataLoaders are two
 * clocks, numbered by the caller from 1; an `iteration_clock` annotation may
 * describe them). `pacing` is 1 when this clock is the one that marks the
 * program's iterations now (the in-process growth index counts only those
 * ticks), 0 when a more trusted clock ticks in the same iterations. */
void gpuleak_mark_clock_step(uint64_t step, int source, uint32_t clock, int pacing);

/* A measurement; `metric` is a trace::Metric value, `device` -1 if none. */
void gpuleak_record_sample(int metric, int device, uint64_t value);

/* A fact about the process as key and (usually JSON) value. */
void gpuleak_annotate(const char* key, const char* value);

/* PyTorch caching-allocator events (from its trace tracker): a block handed
 * to a tensor, and its free being requested. The stack of the calling thread
 * is captured (Python frames when it holds the GIL). */
void gpuleak_record_torch_alloc(uint64_t address, uint64_t size, int device, uint64_t stream);
void gpuleak_record_torch_free(uint64_t address, int device);
/* The same allocation made while an autograd node runs its backward:
 * `node_type` identifies the node's class (the address of its vtable), and
 * stands for the native stack, which is not unwound (unless
 * GPULEAK_BACKWARD_NATIVE_STACKS=1); 0 records as gpuleak_record_torch_alloc. */
void gpuleak_record_torch_alloc_in_node(uint64_t address, uint64_t size, int device,
                                        uint64_t stream, uint64_t node_type);

/* Array blocks of another framework's memory pool, recorded like PyTorch's
 * blocks (tensor-level, the calling thread's Python stack): `framework` 1 is
 * CuPy (its MemoryHook, python/gpuleak/cupy_arrays.py), 2 is JAX
 * (python/gpuleak/jax_arrays.py); any other value is ignored. */
void gpuleak_record_array_alloc(uint64_t address, uint64_t size, int device, uint64_t stream,
                                int framework);
void gpuleak_record_array_free(uint64_t address, int device, int framework);

/* Registers functions that read the calling thread's Python frames without
 * the GIL (python/gpuleak/python_frame_reader.c, compiled for the running
 * Python). With them, allocations get Python stacks even on threads that
 * released the GIL, as PyTorch does while it runs an operator:
 *   int  frames(void** codes, int* lastis, int max);
 *   int  line(void* code, int lasti);
 *   void code_info(void* code, char* file, int file_size, char* function,
 *                  int function_size, int* first_line);
 * Passing null pointers unregisters them. */
void gpuleak_set_python_frame_reader(void* frames, void* line, void* code_info);

/* Sites (stack ids) whose number of live tensor allocations rose at 8
 * consecutive step boundaries, found since the last call, each reported
 * once; so the Python package can ask, in the process and right away, what
 * holds them. For site i: site_ids[i], allocation_counts[i] live
 * allocations as [address, size] pairs in
 * allocations[i * max_allocations * 2 ...]. Returns the number of sites. */
int gpuleak_take_growth_candidates(uint32_t* site_ids, uint32_t* allocation_counts,
                                   uint64_t* allocations, int max_sites, int max_allocations);

/* A step boundary for the live index without a step, for processes that
 * mark none in the process (a CuPy or JAX loop, whose steps gpuleak finds
 * later from the trace): called every few tens of milliseconds by the Python package, it
 * judges the live index as a step boundary would, so a site that keeps
 * growing becomes a candidate while a short job still runs. With
 * index_driver_allocations = 1, driver allocations and virtual-memory
 * mappings are indexed from then on too (JAX's platform allocator places
 * its arrays in them; not with CuPy,
 * whose arrays lie inside its pool's driver allocations, at the same
 * addresses). Records nothing in the trace. */
void gpuleak_mark_growth_boundary(int index_driver_allocations);
/* The same, by its first name (docs/glossary.md: not a tick but a step
 * boundary); kept so that packages built against it still load. */
void gpuleak_growth_tick(int index_driver_allocations);

/* The program is ending (called by the Python package at exit when no
 * in-process holder walk ran): sites whose live tensor allocations rose at 4
 * or more step boundaries, not necessarily in a row, and hold 4 or more
 * allocations more than at the first boundary that saw them, become growth
 * candidates for gpuleak_take_growth_candidates (largest rise first), so a
 * short run, or a leak of every other step, still gets its holder walked
 * once. Records nothing in the trace. */
void gpuleak_growth_candidates_at_exit(void);

/* lend = 1 as a backward pass begins, 0 as it ends (called with the GIL
 * held, through the registered frame reader): while lent, allocations on
 * threads that run no Python code (autograd's engine threads) carry the
 * lending thread's Python frames, so they are blamed on the line that
 * called backward(). Nested calls only count; the outermost lends. */
void gpuleak_lend_python_stack(int lend);

/* Writes everything recorded so far to the trace file now. */
void gpuleak_flush(void);

/* Stops recording for good: writes everything recorded, closes the trace
 * and ends the writer thread; every later call records nothing, and
 * gpuleak_start_recording returns 0 (a process records into one trace in
 * its life). For `gpuleak attach`, which leaves the process running after
 * it detaches (docs/attach.md). */
void gpuleak_stop_recording(void);

/* `gpuleak attach` in a process without Python: starts a thread that starts
 * recording (as InitializeInjection does: driver calls through CUPTI from
 * now on), and closes the trace when the control folder
 * GPULEAK_ATTACH_CONTROL holds `stop`, when the gpuleak process
 * GPULEAK_ATTACH_GPULEAK_PID (with start time GPULEAK_ATTACH_GPULEAK_TICKS)
 * is gone, or after GPULEAK_ATTACH_DURATION_S seconds. Returns 1 at once
 * (0 if the thread could not start); called by gpuleak's injector on a
 * thread that was stopped in a system call, so it does nothing else there. */
int gpuleak_attach_start(void);

#ifdef __cplusplus
}
#endif

#endif /* GPULEAK_COLLECTOR_API_H_ */
