# Shape of Lightning-AI/pytorch-lightning@7f0c3436cd3f6ad3753125672024fc415cbcb414:src/lightning/fabric/strategies/launchers/subprocess_script.py
# (_SubprocessScriptLauncher.launch and _call_children_scripts), shortened. Clean: the
# children kept in self.procs are handed to a process observer that terminates all of
# them when one fails.
import os
import subprocess
import sys

import torch


class _SubprocessScriptLauncher:
    def __init__(self, num_processes):
        self.num_processes = num_processes
        self.procs: list[subprocess.Popen] = []

    def launch(self, function, *args, **kwargs):
        self._call_children_scripts()
        _launch_process_observer(self.procs)
        return function(*args, **kwargs)

    def _call_children_scripts(self):
        for local_rank in range(1, self.num_processes):
            env_copy = os.environ.copy()
            env_copy["LOCAL_RANK"] = f"{local_rank}"
            command = [sys.executable, *sys.argv]
            proc = subprocess.Popen(command, env=env_copy, cwd=None)
            self.procs.append(proc)
