# Shape of Lightning-AI/pytorch-lightning@7f0c3436cd3f6ad3753125672024fc415cbcb414:src/lightning/pytorch/strategies/launchers/subprocess_script.py
# (_SubprocessScriptLauncher), shortened. Clean: every child started is kept in self.procs,
# and kill() (called by the trainer on failure) kills each one.
import os
import sys
import subprocess

import torch


class _SubprocessScriptLauncher:
    def __init__(self, num_processes):
        self.num_processes = num_processes
        self.procs: list[subprocess.Popen] = []

    def launch(self, function, *args, **kwargs):
        self._call_children_scripts()
        return function(*args, **kwargs)

    def kill(self, signum):
        for proc in self.procs:
            proc.send_signal(signum)
            proc.kill()

    def _call_children_scripts(self):
        for local_rank in range(1, self.num_processes):
            env_copy = os.environ.copy()
            env_copy["LOCAL_RANK"] = f"{local_rank}"
            command = [sys.executable, *sys.argv]
            new_process = subprocess.Popen(command, env=env_copy, cwd=None)
            self.procs.append(new_process)
