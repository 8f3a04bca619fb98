import multiprocessing as mp
import torch


def child(rank):
    model = build().cuda(rank)
    train(model)


def main():
    p = mp.Process(target=child, args=(0,), daemon=True)
    p.start()
    p.join()
