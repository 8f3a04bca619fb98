# Source: https://github.com/pytorch/pytorch/blob/main/torch/_utils.py (class ExceptionWrapper,
#   which DataLoader workers use to send errors to the main process)
# Label: clean. sys.exc_info() is read inside the handler but only its type and the formatted
#   text are kept; the traceback object is dropped with the frame.
import sys
import traceback

import torch


class ExceptionWrapper:
    r"""Wraps an exception plus traceback to communicate across threads"""

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        raise self.exc_type(msg)


def worker_loop(dataset, index_queue, data_queue):
    while True:
        idx = index_queue.get()
        if idx is None:
            break
        try:
            data = torch.as_tensor(dataset[idx])
        except Exception:
            data = ExceptionWrapper(where="in DataLoader worker process")
        data_queue.put((idx, data))
