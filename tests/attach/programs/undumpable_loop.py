"""training_loop.py in a process that made itself undumpable (PR_SET_DUMPABLE 0), as sandboxes
and some launchers do: the kernel then lets only a tracer with CAP_SYS_PTRACE in."""
import ctypes
import os
import runpy

PR_SET_DUMPABLE = 4
ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "training_loop.py"),
               run_name="__main__")
