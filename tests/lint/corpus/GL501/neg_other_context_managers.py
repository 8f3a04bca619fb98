import contextlib
import torch
from torch.utils.data import DataLoader


def evaluate(model, dataset, path):
    loader = DataLoader(dataset, batch_size=64)
    with torch.no_grad(), open(path, "w") as log:
        for batch in loader:
            log.write(str(model(batch).sum().item()))
    iterator = iter(loader)
    with contextlib.closing(iterator):
        pass
