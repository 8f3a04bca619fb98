import torch


def train(model, loader):
    errors = []
    for batch in loader:
        try:
            model(batch)
        except RuntimeError as e:
            errors.append(e.with_traceback(None))
    return errors
