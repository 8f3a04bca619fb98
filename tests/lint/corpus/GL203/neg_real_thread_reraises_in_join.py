# Shape of pytorch/pytorch@01c9f4fcc3ffa856d3d1b038998b8ad90db4ec02:torch/distributed/_local_tensor/__init__.py
# (_ExceptionRaisingThread), shortened. Clean: the exception is kept to be raised again
# by join() in the caller's thread; one exception, released when it is raised.
import threading

import torch


class _ExceptionRaisingThread(threading.Thread):
    def __init__(self, target=None, args=()):
        super().__init__(target=target, args=args)
        self.exception = None

    def run(self):
        try:
            super().run()
        except BaseException as e:
            self.exception = e

    def join(self, timeout=None):
        super().join(timeout=timeout)
        if self.exception:
            raise self.exception
