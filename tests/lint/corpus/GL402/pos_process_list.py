import torch
import torch.multiprocessing as mp


def launch(world_size):
    procs = []
    for rank in range(world_size):
        p = mp.Process(target=run, args=(rank, world_size))  # expect: GL402
        p.start()
        procs.append(p)
    monitor(procs)
    for p in procs:
        p.join()
