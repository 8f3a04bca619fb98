"""Stand-in GPU tensors for tests on machines without a GPU.

Each is a CPU tensor whose storage is reported to the collector exactly as
PyTorch's allocator hook reports a CUDA block (gpuleak_record_torch_alloc at
its creation, gpuleak_record_torch_free when its storage dies), so the
collector, the analysis and the holder walk see what they see on a GPU.
"""
import ctypes
import os
import weakref

import torch


def _collector():
    # Loaded when the first stand-in is made: gpuleak.track() has configured it by then.
    return ctypes.CDLL(os.environ["GPULEAK_COLLECTOR"])


def gpu_tensor(elements):
    tensor = torch.zeros(elements)
    library = _collector()
    address = tensor.data_ptr()
    library.gpuleak_record_torch_alloc(ctypes.c_uint64(address),
                                       ctypes.c_uint64(tensor.numel() * tensor.element_size()),
                                       0, ctypes.c_uint64(0))
    weakref.finalize(tensor, library.gpuleak_record_torch_free, ctypes.c_uint64(address), 0)
    return tensor
