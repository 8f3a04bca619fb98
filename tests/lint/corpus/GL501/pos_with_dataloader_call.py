import torch
from torch.utils.data import DataLoader


def evaluate(model, dataset):
    with DataLoader(dataset, batch_size=64, num_workers=4) as loader:  # expect: GL501
        for batch in loader:
            model(batch)
