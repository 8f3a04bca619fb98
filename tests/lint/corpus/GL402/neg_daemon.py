import multiprocessing as mp
import torch


def start_monitor():
    p = mp.Process(target=watch_gpu, daemon=True)
    p.start()
    return p
