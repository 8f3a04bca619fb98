import torch
from torch.utils.data import DataLoader


def collate(batch):
    return torch.stack([torch.as_tensor(b) for b in batch])


loader = DataLoader(dataset, batch_size=16, collate_fn=collate, num_workers=4)
