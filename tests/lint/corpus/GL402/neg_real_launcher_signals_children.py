# Shape of Lightning-AI/pytorch-lightning@7f0c3436cd3f6ad3753125672024fc415cbcb414:src/lightning/pytorch/strategies/launchers/subprocess_script.py
# (_SubprocessScriptLauncher.kill and _call_children_scripts), shortened. Clean: every child
# is kept in self.procs, and kill(signum), which the trainer calls when the run fails,
# sends each one the signal.
import os
import subprocess
import sys

import torch


class _SubprocessScriptLauncher:
    def __init__(self, num_processes):
        self.num_processes = num_processes
        self.procs: list[subprocess.Popen] = []

    def kill(self, signum):
        for proc in self.procs:
            # this skips subprocesses already terminated
            proc.send_signal(signum)

    def _call_children_scripts(self):
        self.procs = []
        for local_rank in range(1, self.num_processes):
            env_copy = os.environ.copy()
            env_copy["LOCAL_RANK"] = f"{local_rank}"
            command = [sys.executable, *sys.argv]
            new_process = subprocess.Popen(command, env=env_copy, cwd=None)
            self.procs.append(new_process)
