"""A program whose main thread waits in C code (time.sleep): no bytecode runs there, so no
pending call either, until it returns.

    sleeps_in_c.py SECONDS UNUSED EXIT_STATUS
"""
import sys
import time

seconds, _, exit_status = (int(a) for a in sys.argv[1:4])
print("ready", flush=True)
time.sleep(seconds)
print("done", flush=True)
sys.exit(exit_status)
