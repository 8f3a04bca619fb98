# Source: https://github.com/pytorch/pytorch/pull/182980
# Reported: "When an exception is caught with except Exception as e and stored in a variable that
#   outlives the except block, the traceback object holds references to the frame's locals,
#   creating a reference cycle. This can delay garbage collection of large objects like tensors".
# Pattern: a compile wrapper remembers the failure on self and falls back to eager.
# Label: the line marked `# leak` keeps the memory.
import torch


class CompiledFunctionWithFallback:
    def __init__(self, fn):
        self.fn = fn
        self.compiled = torch.compile(fn)
        self.failure = None

    def __call__(self, *args):
        if self.failure is None:
            try:
                return self.compiled(*args)
            except Exception as e:
                self.failure = e  # leak
        return self.fn(*args)
