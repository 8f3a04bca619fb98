import subprocess
import torch


def run_eval_in_background(checkpoint):
    proc = subprocess.Popen(["python", "eval.py", checkpoint])  # expect: GL402
    train_more()
    return proc.wait()
