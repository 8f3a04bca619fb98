import torch
from torch.utils.data import DataLoader, Dataset


class Embedded(Dataset):
    def __init__(self, table):
        self.table = torch.tensor(table, device="cuda")  # expect: GL301

    def __len__(self):
        return self.table.size(0)

    def __getitem__(self, i):
        return self.table[i]


loader = DataLoader(Embedded(rows), batch_size=64, shuffle=True, num_workers=6)
