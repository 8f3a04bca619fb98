# Shape of pytorch/pytorch:torch/testing/_internal/optests/generate_tests.py (OpCheckMode,
# stored index ids 51837182543 and 61672098), shortened. Clean: the mode collects the
# errors of each operator check and raises them on exit (maybe_raise_errors_on_exit); it
# lives for one `with` block.
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class OpCheckMode(TorchDispatchMode):
    def __init__(self, test_name, failures_dict):
        self.test_name = test_name
        self.failures_dict = failures_dict
        # OpCheckMode suppresses errors, collects them here, and then raises them on exit.
        self.seen_ops_to_errors = {}

    def maybe_raise_errors_on_exit(self) -> None:
        for qualname in self.seen_ops_to_errors.keys():
            if len(self.seen_ops_to_errors[qualname]) == 0:
                continue
            ex, func, args, kwargs = self.seen_ops_to_errors[qualname][0]
            raise OpCheckError(f"{qualname} failed on test {self.test_name}") from ex

    def __exit__(self, *args, **kwargs):
        try:
            self.maybe_raise_errors_on_exit()
        finally:
            super().__exit__(*args, **kwargs)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs if kwargs else {}
        qualname = func.name()
        result = func(*args, **kwargs)
        try:
            if qualname not in self.seen_ops_to_errors:
                self.seen_ops_to_errors[qualname] = []
            self.run_test_util(func, args, kwargs)
        except Exception as ex:
            self.seen_ops_to_errors[qualname].append((ex, func, args, kwargs))
        return result
