"""Run by collector_test with /usr/bin/python3: python_stacks.py COLLECTOR.so

Calls the collector's C API from Python in the two ways ctypes offers:
through PyDLL (the calling thread keeps the GIL: the collector must record
this file's Python frames) and through CDLL (ctypes releases the GIL around
the call: the collector must not read Python frames, and must not crash,
even while another thread holds the GIL and runs Python code).
"""
import ctypes
import sys
import threading

path = sys.argv[1]
with_gil_lib = ctypes.PyDLL(path)
without_gil_lib = ctypes.CDLL(path)
u64 = ctypes.c_uint64

WITH_GIL_BASE = 0x10000000
WITHOUT_GIL_BASE = 0x20000000


def allocate_with_gil(i):
    with_gil_lib.gpuleak_record_torch_alloc(u64(WITH_GIL_BASE + i * 4096), u64(4096), 0, u64(0))  # MARK: with GIL


def allocate_without_gil(i):
    without_gil_lib.gpuleak_record_torch_alloc(
        u64(WITHOUT_GIL_BASE + i * 4096), u64(4096), 0, u64(0)
    )  # MARK: without GIL


def main():
    if with_gil_lib.gpuleak_start_recording() != 1:
        sys.exit("recording did not start")
    # A thread that runs Python code (and so holds the GIL) whenever it can,
    # while the main thread calls the collector without the GIL.
    stop = threading.Event()

    def spin():
        count = 0
        while not stop.is_set():
            count += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    for i in range(3000):
        allocate_without_gil(i)
    stop.set()
    spinner.join()
    for i in range(200):
        allocate_with_gil(i)
    with_gil_lib.gpuleak_flush()
    print("done")


main()
