import torch

LAST_EXCEPTION = None


def guarded_step(model, batch):
    global LAST_EXCEPTION
    try:
        return model(batch)
    except Exception as exc:
        LAST_EXCEPTION = exc  # expect: GL203
        raise
