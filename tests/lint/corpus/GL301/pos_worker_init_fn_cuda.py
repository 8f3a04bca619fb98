import torch
from torch.utils.data import DataLoader


def init_worker(worker_id):
    torch.cuda.set_device(worker_id % torch.cuda.device_count())  # expect: GL301


loader = DataLoader(dataset, num_workers=8, worker_init_fn=init_worker)
