import torch
from torch.utils.data import DataLoader, Dataset


class Casting(Dataset):
    def __init__(self, xs):
        self.xs = xs

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        if torch.cuda.is_available():
            pass
        return self.xs[i].to(torch.float32)


loader = DataLoader(Casting(xs), num_workers=4)
