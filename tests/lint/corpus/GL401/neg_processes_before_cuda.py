import multiprocessing as mp
import torch


def main():
    procs = [mp.Process(target=prepare_shard, args=(i,), daemon=True) for i in range(4)]
    for p in procs:
        p.start()
    model = build().cuda()
    train(model)
