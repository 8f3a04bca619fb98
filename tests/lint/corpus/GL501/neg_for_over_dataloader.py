import torch
from torch.utils.data import DataLoader


def run(model, dataset):
    for batch in DataLoader(dataset, batch_size=4):
        model(batch)
