import multiprocessing
import torch

LOOKUP = torch.arange(1024, device="cuda")


def score(item):
    return item * 2


def score_all(items):
    with multiprocessing.Pool(4) as pool:  # expect: GL401
        return pool.map(score, items)
