"""A fast training loop without torch or a GPU, through the collector's C API
(as fake_train.py), for the bounded-trace test of tests/cli/long_job_test.py:

    gpuleak run --trace-max-bytes 16M ... -- python3 fake_long_train.py STEPS leak|clean

Per step 40 temporary 64 KiB "torch blocks" allocated and freed, one 4 KiB
block kept ("leak", the line marked below) and an explicit step mark: tens
of thousands of events a second, so the collector compacts its trace
several times in seconds.
"""
import ctypes
import os
import sys

lib = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
u64 = ctypes.c_uint64


def main():
    steps, leak = int(sys.argv[1]), sys.argv[2] == "leak"
    if lib.gpuleak_start_recording() != 1:
        sys.exit("the collector did not start")
    lib.gpuleak_annotate(b"torch_tracking", b'{"mode": "allocator-hook"}')
    for step in range(steps):
        for i in range(40):
            lib.gpuleak_record_torch_alloc(u64(0x90000000 + i * 0x100000), u64(1 << 16), 0, u64(0))
        for i in range(40):
            lib.gpuleak_record_torch_free(u64(0x90000000 + i * 0x100000), 0)
        if leak:
            lib.gpuleak_record_torch_alloc(u64(0x10000000 + step * 0x1000), u64(4096), 0, u64(0))  # LEAK
        lib.gpuleak_mark_step(u64(step + 1), 2)


if __name__ == "__main__":
    main()
