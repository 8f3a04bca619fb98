# Source: https://github.com/pytorch/pytorch/pull/182980
# Reported: "This PR adds e.__traceback__ = None after storing the exception ... The exception object
#   itself is preserved for error messages and re-raising".
# Label: clean. The stored exception no longer references the frames of the failed call.
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
                self.failure = e
                e.__traceback__ = None
        return self.fn(*args)
