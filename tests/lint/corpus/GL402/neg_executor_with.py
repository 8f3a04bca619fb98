from concurrent.futures import ProcessPoolExecutor
import torch


def shard(items):
    with ProcessPoolExecutor() as ex:
        return list(ex.map(prepare, items))
