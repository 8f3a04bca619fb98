import traceback
import torch


def train(model, loader):
    errors = []
    messages = []
    for batch in loader:
        try:
            model(batch)
        except RuntimeError as e:
            errors.append(repr(e))
            messages.append(str(e))
            messages.append(traceback.format_exc())
    return errors, messages
