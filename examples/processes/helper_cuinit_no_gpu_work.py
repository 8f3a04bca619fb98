"""Control: a helper process that initializes the CUDA driver and never uses the GPU.

Reported in https://github.com/Lightning-AI/pytorch-lightning/issues/20049:
with mpi4py installed, Lightning's Trainer initializes MPI, and an MPI
"singleton" initialization (https://github.com/open-mpi/ompi/issues/10590)
starts Open MPI's runtime helper (orted) as a child of the training process.
Open MPI's CUDA support initializes the CUDA driver to find the GPUs, so under
a CUDA injection (gpuleak's collector) the helper is traced like any CUDA
process, although it never creates a context or allocates GPU memory.

Here the main program starts such a helper (cuInit and a device count through
ctypes, then it waits for the job to end) and trains a small model itself.

What gpuleak must say: the helper is a subprocess of the main program that
initialized CUDA and used no GPU memory: one summary line, no section of its
own, no finding. The main program's CUDA is first used at the line marked
CUDA-INIT.

usage: python3 helper_cuinit_no_gpu_work.py [--steps N] [--truth FILE]
"""
import argparse
import json
import os
import subprocess
import sys

HELPER = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
count = ctypes.c_int()
cuda.cuDeviceGetCount(ctypes.byref(count))
print(count.value, flush=True)
sys.stdin.read()  # lives until its parent closes the pipe
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--truth", help="write the pids of the main process and the helper here")
    args = parser.parse_args()

    helper = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    devices = int(helper.stdout.readline())
    if args.truth:
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "subprocess": [helper.pid]}, out)

    import torch

    model = torch.nn.Linear(256, 256).cuda()  # CUDA-INIT (main)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        loss = model(torch.randn(64, 256, device="cuda")).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    helper.stdin.close()
    helper.wait()
    print("%d GPU(s); loss %.4f" % (devices, loss.item()))


if __name__ == "__main__":
    main()
