import multiprocessing as mp
import torch


def convert(paths):
    p = mp.Process(target=convert_all, args=(paths,))
    p.start()
    p.join()
