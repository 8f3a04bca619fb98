import subprocess
import torch


def export(checkpoint):
    with subprocess.Popen(["python", "export.py", checkpoint]) as proc:
        proc.wait()
