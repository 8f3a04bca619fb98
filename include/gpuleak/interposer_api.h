/* The contract between the driver interposer (libgpuleak_interposer.so, a
 * small library `gpuleak run` puts in LD_PRELOAD) and the collector.
 *
 * The interposer exports the CUDA driver's allocation, free and context entry
 * points under their own names, wraps what cuGetProcAddress and dlsym hand
 * out for them, and forwards every call to the real driver. Until a
 * collector attaches, a wrapped call is the driver's call and nothing more.
 * Once attached, each followed call is reported to the collector with the
 * driver's own API id (the CUPTI callback id, cupti_driver_cbid.h) and the
 * parameter struct CUPTI would pass (generated_cuda_meta.h), so both capture
 * backends read calls the same way.
 *
 * Threads: the hooks are called on the calling thread, never while the same
 * thread is already inside a hook or a wrapped call (calls the driver makes
 * to its own entry points are not reported twice). They must not throw.
 */
#ifndef GPULEAK_INTERPOSER_API_H_
#define GPULEAK_INTERPOSER_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GpuleakDriverHooks {
  size_t struct_size; /* sizeof(GpuleakDriverHooks) of the caller */
  /* Before a release or context call runs (`params` holds its inputs).
   * The value returned is passed to after_call: a release's sequence
   * number, taken before the driver can hand its address to someone else. */
  uint64_t (*before_call)(uint32_t cbid, const void* params);
  /* After any followed call returned `result` (a CUresult); the out
   * pointers in `params` hold what the driver wrote. */
  void (*after_call)(uint32_t cbid, const void* params, int result, uint64_t token);
} GpuleakDriverHooks;

typedef struct GpuleakInterposerState {
  size_t struct_size;
  /* 1 when the interposer was loaded before the driver library: every entry
   * point the program obtained went through it. 0 when libcuda was already
   * loaded (the interposer was not preloaded): earlier lookups bypass it. */
  int loaded_before_driver;
  /* Entry points handed out wrapped, through dlsym or cuGetProcAddress. */
  uint64_t lookups_wrapped;
  /* Followed calls that ran before a collector attached (not reported). */
  uint64_t calls_before_attach;
} GpuleakInterposerState;

/* Exported by libgpuleak_interposer.so. attach: 1 when `hooks` are now the
 * interposer's (a later attach replaces them; null detaches), 0 when the
 * struct is too small. state: fills `out` (struct_size set by the caller). */
int gpuleak_interposer_attach(const GpuleakDriverHooks* hooks);
void gpuleak_interposer_state(GpuleakInterposerState* out);

#ifdef __cplusplus
}
#endif

#endif /* GPULEAK_INTERPOSER_API_H_ */
