import torch
import torch.multiprocessing as mp


def launch(world_size):
    procs = []
    for rank in range(world_size):
        p = mp.Process(target=run, args=(rank, world_size))
        p.start()
        procs.append(p)
    try:
        for p in procs:
            p.join()
    except BaseException:
        for p in procs:
            p.terminate()
        raise
