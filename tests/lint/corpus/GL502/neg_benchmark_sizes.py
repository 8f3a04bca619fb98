import torch


def sweep(sizes):
    results = {}
    for size in sizes:
        results[size] = run_benchmark(size)
        torch.cuda.empty_cache()
    return results
