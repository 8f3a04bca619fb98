import multiprocessing as mp
import torch


def start_logger():
    mp.Process(target=log_gpu_usage).start()  # expect: GL402
