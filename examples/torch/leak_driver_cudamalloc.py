"""A "CUDA extension" that allocates scratch memory with cudaMalloc and never frees it.

Training calls `fused_clip_grad_`, which stands in for a custom C++/CUDA
extension op: it takes 2 MiB of scratch memory straight from the CUDA runtime
(`cudaMalloc`, through ctypes), clears it, clips the gradients, and returns --
without the matching `cudaFree`. This memory is not a PyTorch tensor: PyTorch's
allocator statistics (`memory_allocated`, `memory_reserved`) never see it, and
no Python object refers to it, so there is no holder to find. Only the driver
(and nvidia-smi) sees the device fill up by 2 MiB per step.

The runtime library is the one PyTorch already loaded (found in
/proc/self/maps), else the system's libcudart, else CuPy's runtime bindings.
With `--device cpu` the extension is skipped (it needs a GPU) and nothing leaks.

Cause: non-tensor-driver-allocations.
Fix: free the scratch memory (`cudaFree`) before returning -- or, better,
allocate it as a tensor (`torch.empty(n, dtype=torch.uint8, device="cuda")`)
so PyTorch's caching allocator reuses it.
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

SCRATCH_BYTES = 2 << 20
BATCH = 128
FEATURES = 128


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class CudaRuntime:
    """cudaMalloc/cudaMemset from a CUDA runtime library loaded with ctypes (or CuPy's bindings)."""

    def __init__(self):
        self._lib = None
        self._cupy = None
        for path in self._candidates():
            try:
                lib = ctypes.CDLL(path)
                lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
                lib.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
            except (OSError, AttributeError):
                continue
            lib.cudaMalloc.restype = ctypes.c_int
            lib.cudaMemset.restype = ctypes.c_int
            self._lib = lib
            self.source = path
            return
        import cupy  # the last resort; raises ImportError when missing
        self._cupy = cupy
        self.source = "cupy %s" % cupy.__version__

    @staticmethod
    def _candidates():
        paths = []
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "libcudart" in os.path.basename(path) and path not in paths:
                    paths.append(path)
        system = ctypes.util.find_library("cudart")
        if system:
            paths.append(system)
        paths.extend(sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*")))
        return paths

    def malloc(self, nbytes):
        if self._cupy is not None:
            return self._cupy.cuda.runtime.malloc(nbytes)
        pointer = ctypes.c_void_p()
        error = self._lib.cudaMalloc(ctypes.byref(pointer), nbytes)
        if error != 0:
            raise RuntimeError("cudaMalloc failed with error %d" % error)
        return pointer.value

    def memset(self, address, value, nbytes):
        if self._cupy is not None:
            self._cupy.cuda.runtime.memset(address, value, nbytes)
            return
        error = self._lib.cudaMemset(ctypes.c_void_p(address), value, nbytes)
        if error != 0:
            raise RuntimeError("cudaMemset failed with error %d" % error)


def fused_clip_grad_(parameters, max_norm, runtime):
    """Stands in for an extension op that needs scratch memory on the device."""
    if runtime is not None:
        scratch = runtime.malloc(SCRATCH_BYTES)  # LEAK: non-tensor-driver-allocations
        runtime.memset(scratch, 0, SCRATCH_BYTES)
        # ... the extension's kernels would use `scratch` here; cudaFree(scratch) is missing.
    return torch.nn.utils.clip_grad_norm_(parameters, max_norm)


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    runtime = CudaRuntime() if device.type == "cuda" else None
    weights = torch.randn(FEATURES, 1, device=device)
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES, device=device)
        loss = F.mse_loss(model(x), torch.sin(x @ weights))
        optimizer.zero_grad()
        loss.backward()
        fused_clip_grad_(model.parameters(), 1.0, runtime)
        optimizer.step()
    return loss.item(), runtime


def main():
    args = parse_args()
    loss, runtime = train(args.steps, torch.device(args.device))
    where = runtime.source if runtime else "skipped on the CPU"
    print("steps=%d loss=%.4f scratch_runtime=%s" % (args.steps, loss, where))


if __name__ == "__main__":
    main()
