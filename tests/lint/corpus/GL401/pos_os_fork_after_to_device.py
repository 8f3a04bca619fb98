import os
import torch


def main(device):
    model = load().to(device)
    pid = os.fork()  # expect: GL401
    if pid == 0:
        serve_metrics()
        os._exit(0)
    run(model)
    os.waitpid(pid, 0)
