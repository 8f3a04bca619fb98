import multiprocessing
from concurrent.futures import ProcessPoolExecutor
import torch


def preprocess_all(files):
    torch.cuda.synchronize()
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=4, mp_context=ctx) as ex:
        return list(ex.map(preprocess, files))
