# Shape of huggingface/pytorch-image-models@aa4b5850c1543fa488abf260f18390eda46cf85d:timm/optim/adan.py (MultiTensorApply), shortened. Clean: an ImportError
# raised while importing an optional kernel at construction; its traceback holds this
# frame only, and no tensors.
import torch


class MultiTensorApply(object):
    available = False

    def __init__(self, chunk_size):
        try:
            import amp_C

            MultiTensorApply.available = True
            self.chunk_size = chunk_size
        except ImportError as err:
            MultiTensorApply.available = False
            MultiTensorApply.import_err = err
