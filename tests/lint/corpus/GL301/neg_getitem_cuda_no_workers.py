import torch
from torch.utils.data import DataLoader, Dataset


class OnDevice(Dataset):
    def __init__(self, xs):
        self.xs = xs

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        return self.xs[i].cuda()


loader = DataLoader(OnDevice(xs), batch_size=32, num_workers=0)
