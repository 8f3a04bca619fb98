import torch
from torch.utils import data


def run(model, dataset):
    loader = data.DataLoader(dataset, batch_size=8, num_workers=2, persistent_workers=True)
    with loader:  # expect: GL501
        for x in loader:
            model(x)
