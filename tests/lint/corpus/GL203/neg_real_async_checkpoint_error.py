# Shape of Lightning-AI/pytorch-lightning@7f0c3436cd3f6ad3753125672024fc415cbcb414:src/lightning/pytorch/plugins/io/async_plugin.py (AsyncCheckpointIO), shortened.
# Clean: an error of the background save is kept to be raised by the next
# save_checkpoint() or by teardown().
from concurrent.futures import ThreadPoolExecutor

import torch


class AsyncCheckpointIO:
    def __init__(self, checkpoint_io):
        self.checkpoint_io = checkpoint_io
        self._executor = ThreadPoolExecutor(max_workers=1)
        self._error = None

    def save_checkpoint(self, *args, **kwargs):
        def _save_checkpoint(*args, **kwargs):
            try:
                self.checkpoint_io.save_checkpoint(*args, **kwargs)
            except BaseException as ex:
                self._error = ex

        self._executor.submit(_save_checkpoint, *args, **kwargs)
        if self._error:
            raise self._error

    def teardown(self):
        self._executor.shutdown(wait=True)
        if self._error:
            raise self._error
