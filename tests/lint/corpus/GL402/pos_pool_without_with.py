import multiprocessing
import torch


def encode_all(chunks):
    pool = multiprocessing.Pool(8)  # expect: GL402
    results = pool.map(encode, chunks)
    pool.close()
    pool.join()
    return torch.cat(results)
