# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/integrations/mxfp4.py (convert_moe_packed_tensors), shortened.
# Kept: the CPU retry runs inside the except block, so the frames of the GPU attempt that
# ran out of memory, and the GPU tensors they hold, stay allocated until it returns.
import torch


def _convert_moe_packed_tensors(blocks, scales, *, dtype, rows_per_chunk):
    out = torch.empty(blocks.shape[0], rows_per_chunk, dtype=dtype, device=blocks.device)
    for r0 in range(0, blocks.shape[0], rows_per_chunk):
        out[r0 : r0 + rows_per_chunk] = blocks[r0 : r0 + rows_per_chunk].to(dtype) * scales[r0]
    return out


def convert_moe_packed_tensors(blocks, scales, *, dtype=torch.bfloat16, rows_per_chunk=32768 * 1024):
    try:
        return _convert_moe_packed_tensors(blocks, scales, dtype=dtype, rows_per_chunk=rows_per_chunk)
    except torch.OutOfMemoryError:
        blocks = blocks.to("cpu")
        scales = scales.to("cpu")
        return _convert_moe_packed_tensors(blocks, scales, dtype=dtype, rows_per_chunk=rows_per_chunk)  # expect: GL203
