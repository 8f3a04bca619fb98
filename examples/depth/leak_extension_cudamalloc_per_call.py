"""A PyTorch C++/CUDA extension whose op cudaMallocs a scratch buffer on every call and never frees it.

Sources:
  https://discuss.pytorch.org/t/memory-leak-due-to-a-tensor-created-with-thcudatensor-newwithsize2d-in-an-extension/22430
      ("Memory leak due to a tensor created with THCudaTensor_newWithSize2d in an extension": device
      memory an extension's C code allocates itself is not released when the op returns)
  https://github.com/pytorch/pytorch/issues/152063  ("Memory leak in autograd with custom CUDA operations":
      "Define a simple custom CUDA operation using the PyTorch C++ extension system ... Run the model in a
      training loop for 100+ iterations ... The memory usage gradually increases even when no new tensors
      should be created or retained.")

What was reported: an extension built with torch.utils.cpp_extension allocates
device memory in its own C++ code, outside PyTorch's tensors and caching
allocator, and does not release it; every call of the op leaves memory behind,
and nothing on the Python side holds it.

This program: builds ext/leak_scratch_ext.cu with torch.utils.cpp_extension.load
(nvcc and ninja, on the GPU machine; --build-only builds and exits) and calls
its `smooth` op once per step on a 1 Mi-element float tensor. The op
cudaMallocs a 4 MiB scratch buffer and returns without cudaFree. The leaked
buffer is a plain driver allocation made from C++ in a Python process: no
Python object refers to it.

Step: one call of the extension op.
Leak: 4,194,304 bytes per step (1,048,576 floats), from cudaMalloc at ext/leak_scratch_ext.cu.
Fix: cudaFree(scratch) before returning -- or allocate the scratch as a tensor
  (torch::empty), which PyTorch's allocator frees and reuses.
"""
import argparse
import os
import sys
import tempfile

import torch
from torch.utils.cpp_extension import load

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "ext", "leak_scratch_ext.cu")
ELEMENTS = 1 << 20


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="calls of the op (default 60)")
    parser.add_argument("--build-only", action="store_true", help="build the extension and exit")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def build():
    name = os.path.splitext(os.path.basename(SOURCE))[0]
    folder = os.path.join(os.environ.get("DEPTH_EXT_BUILD", os.path.join(tempfile.gettempdir(), "depth-ext")), name)
    os.makedirs(folder, exist_ok=True)
    return load(name=name, sources=[SOURCE], build_directory=folder, extra_cuda_cflags=["-O1", "-g"],
                verbose=False)


def main():
    args = parse_args()
    extension = build()
    if args.build_only:
        print("built %s" % SOURCE)
        return
    signal = torch.randn(ELEMENTS, device="cuda")
    checksum = 0.0
    for step in range(args.steps):
        smoothed = extension.smooth(signal)
        checksum += float(smoothed[step])
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print("steps=%d checksum=%.3f device_used_mib=%.1f" % (args.steps, checksum, (total - free) / 2**20))


if __name__ == "__main__":
    main()
