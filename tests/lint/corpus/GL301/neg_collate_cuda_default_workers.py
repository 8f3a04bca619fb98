import torch
from torch.utils.data import DataLoader


def to_gpu_collate(batch):
    return torch.stack([torch.as_tensor(b) for b in batch]).cuda()


loader = DataLoader(dataset, batch_size=16, collate_fn=to_gpu_collate)
