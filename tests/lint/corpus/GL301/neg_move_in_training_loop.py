import torch
from torch.utils.data import DataLoader, Dataset


class Plain(Dataset):
    def __init__(self, xs, ys):
        self.xs, self.ys = xs, ys

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        return torch.as_tensor(self.xs[i]), torch.as_tensor(self.ys[i])


loader = DataLoader(Plain(xs, ys), batch_size=32, num_workers=8, pin_memory=True)
for x, y in loader:
    x = x.to("cuda", non_blocking=True)
    y = y.to("cuda", non_blocking=True)
