import sys
import torch


def safe_forward(model, x, log):
    try:
        return model(x)
    except RuntimeError:
        exc_type, exc_value, exc_tb = sys.exc_info()
        try:
            log.write(f"{exc_type.__name__}: {exc_value}\n")
        finally:
            del exc_type, exc_value, exc_tb
        return None
