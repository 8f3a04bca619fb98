"""The main program uses the stand-in GPU; a helper subprocess only initializes CUDA (no context).

usage: helper_without_gpu_work.py TRUTH_FILE
"""
import json
import os
import subprocess
import sys

import stand_in_gpu

HELPER = """
import sys
sys.path.insert(0, %r)
import stand_in_gpu
stand_in_gpu.start_collector_only()
print("up", flush=True)
sys.stdin.read()
stand_in_gpu.leave()
""" % os.path.dirname(os.path.abspath(__file__))


def main():
    stand_in_gpu.use_gpu(1 << 20)
    helper = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    helper.stdout.readline()
    with open(sys.argv[1], "w") as out:
        json.dump({"main": os.getpid(), "subprocess": [helper.pid]}, out)
    helper.stdin.close()
    helper.wait()


if __name__ == "__main__":
    main()
