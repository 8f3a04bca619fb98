import torch
from torch.utils import data


class Pairs(data.Dataset):
    def __init__(self, xs, ys, device):
        self.xs, self.ys, self.device = xs, ys, device

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        return self.xs[i].to(self.device), self.ys[i].to(self.device)  # expect: GL301


def make_loader(args, xs, ys):
    ds = Pairs(xs, ys, torch.device("cuda"))
    return data.DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
