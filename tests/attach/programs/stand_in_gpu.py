"""Stand-in GPU tensors for a program that gpuleak may join while it runs.

Each is a CPU tensor whose storage is reported to the collector exactly as
PyTorch's allocator hook reports a CUDA block (gpuleak_record_torch_alloc
when it is made, gpuleak_record_torch_free when its storage dies), but only
once gpuleak is in the process: the program starts without it, and
`gpuleak attach` sets GPULEAK_COLLECTOR when its agent loads the collector.
"""
import ctypes
import os
import weakref

import torch


def gpu_tensor(elements):
    tensor = torch.zeros(elements)
    path = os.environ.get("GPULEAK_COLLECTOR")
    if path:
        library = ctypes.CDLL(path)  # the handle the agent loaded
        address = tensor.data_ptr()
        library.gpuleak_record_torch_alloc(ctypes.c_uint64(address),
                                           ctypes.c_uint64(tensor.numel() * tensor.element_size()),
                                           0, ctypes.c_uint64(0))
        weakref.finalize(tensor, library.gpuleak_record_torch_free, ctypes.c_uint64(address), 0)
    return tensor
