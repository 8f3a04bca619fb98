import torch
from torch.utils.data import Dataset


class Features(Dataset):
    def __init__(self, arrays):
        self.arrays = arrays

    def __len__(self):
        return len(self.arrays)

    def __getitem__(self, i):
        return torch.as_tensor(self.arrays[i]).cuda(non_blocking=True)  # expect: GL301
