"""Writes a gpuleak trace without a GPU, for the HTML report's browser test.

Usage: GPULEAK_TRACE_DIR=<dir> python3 make_trace.py <libgpuleak_collector.so> leak|clean

Loads the collector with ctypes.PyDLL (the GIL stays held, so every recorded
allocation gets this script's Python stack), starts it without CUDA, and
plays 80 training steps of a PyTorch-like allocator: 8 MiB of weights live
through the run (freed before exit), each step allocates and frees a 1 MiB
activation, and records host RSS, device used/total and pool
reserved samples. In `leak` mode each step also keeps a 64 KiB tensor alive
(the LEAK verdict); `clean` keeps nothing (NO LEAK).

The kept allocation is made on a line whose comment holds markup and whose
function's code object is renamed to markup, so the page must escape both.
The trace is <dir>/gpuleak-<pid>.trace once this process exits.
"""
import ctypes
import sys

STEPS = 80
KEPT_BYTES = 64 << 10
ACTIVATION_BYTES = 1 << 20
WEIGHT_BYTES = 8 << 20


def load(path):
    lib = ctypes.PyDLL(path)
    lib.gpuleak_start_recording.restype = ctypes.c_int
    lib.gpuleak_record_torch_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64]
    lib.gpuleak_record_torch_free.argtypes = [ctypes.c_uint64, ctypes.c_int]
    lib.gpuleak_mark_step.argtypes = [ctypes.c_uint64, ctypes.c_int]
    lib.gpuleak_record_sample.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64]
    return lib


def keep_tensor(lib, address):
    lib.gpuleak_record_torch_alloc(address, KEPT_BYTES, 0, 0)  # kept: </script><b>injected</b>


# The function's name as frames show it: markup that must stay text.
keep_tensor.__code__ = keep_tensor.__code__.replace(
    co_name="keep_</script><b>tensor</b>",
    **({"co_qualname": "keep_</script><b>tensor</b>"} if sys.version_info >= (3, 11) else {})
)


def activation(lib, address):
    lib.gpuleak_record_torch_alloc(address, ACTIVATION_BYTES, 0, 0)


def weights(lib, address):
    lib.gpuleak_record_torch_alloc(address, WEIGHT_BYTES, 0, 0)


def main():
    lib = load(sys.argv[1])
    leak = sys.argv[2] == "leak"
    if lib.gpuleak_start_recording() != 1:
        sys.exit("make_trace.py: the collector did not start recording")
    weights_address = 0x7E0000000000
    weights(lib, weights_address)
    next_address = 0x7F0000000000
    kept = []
    for step in range(STEPS):
        address, next_address = next_address, next_address + (2 << 20)
        activation(lib, address)
        if leak:
            kept.append(next_address)
            keep_tensor(lib, next_address)
            next_address += 2 << 20
        lib.gpuleak_record_torch_free(address, 0)
        lib.gpuleak_record_sample(1, -1, 300 << 20)  # host RSS
        lib.gpuleak_record_sample(2, 0, (900 << 20) + len(kept) * KEPT_BYTES)  # device used
        lib.gpuleak_record_sample(3, 0, 80 << 30)  # device total
        lib.gpuleak_record_sample(4, 0, 512 << 20)  # pool reserved
        lib.gpuleak_mark_step(step, 2)
    lib.gpuleak_record_torch_free(weights_address, 0)


if __name__ == "__main__":
    main()
