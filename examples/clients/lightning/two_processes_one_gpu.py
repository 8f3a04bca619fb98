"""Lightning: two training processes on one GPU at once, one leaking, one not.

Reported: several jobs sharing one GPU is how small Lightning jobs are run on
shared machines (https://github.com/Lightning-AI/pytorch-lightning/issues/14270
is a leak found in one of them); a tool must name the process that leaks and
leave the other alone.

Starts leak_outputs_never_cleared.py and control_outputs_cleared_each_epoch.py
as two child processes on the same device and waits for both; their
CLIENT_STEP lines are prefixed with the script's name.

    python3 two_processes_one_gpu.py --steps 200 [--device cuda|cpu]
"""
import argparse
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = ["leak_outputs_never_cleared.py", "control_outputs_cleared_each_epoch.py"]


def relay(name, stream):
    for line in stream:
        sys.stdout.write(line.replace("CLIENT_STEP ", "CLIENT_STEP[%s] " % name, 1))
        sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    children = []
    for script in SCRIPTS:
        child = subprocess.Popen([sys.executable, os.path.join(HERE, script), "--steps",
                                  str(args.steps), "--device", args.device],
                                 stdout=subprocess.PIPE, text=True)
        thread = threading.Thread(target=relay, args=(script, child.stdout))
        thread.start()
        children.append((child, thread))
    status = 0
    for child, thread in children:
        status = child.wait() or status
        thread.join()
    sys.exit(status)


if __name__ == "__main__":
    main()
