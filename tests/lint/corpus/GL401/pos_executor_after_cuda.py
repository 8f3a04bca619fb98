from concurrent.futures import ProcessPoolExecutor
import torch


def preprocess_all(files):
    torch.cuda.synchronize()
    with ProcessPoolExecutor(max_workers=4) as ex:  # expect: GL401
        return list(ex.map(preprocess, files))
