import multiprocessing
import torch


def encode_all(chunks):
    with multiprocessing.Pool(8) as pool:
        results = pool.map(encode, chunks)
    return torch.cat(results)
