import torch
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    def __init__(self, source):
        self.source = source

    def __iter__(self):
        for record in self.source:
            yield torch.tensor(record).cuda()  # expect: GL301


loader = DataLoader(Stream(source), batch_size=None, num_workers=2)
