# Shape of https://github.com/pytorch/pytorch/issues/71068 ("grad_in, grad_out during 'full
# backward hook' is not freed and memory leak occurs"; the same leak as #82528, fixed in
# PyTorch by #82788): a module with a full backward hook, backward(create_graph=True), and
# the parameters' .grad set to None after each step as PyTorch's warning advises. The hook's
# grad_input and grad_output keep the graph: memory still grows on the PyTorch versions of the
# report. Reconstructed from the description and the visible part of its code.
import torch
import torch.nn as nn


class TestModel(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.nn = nn.Linear(input_size, output_size)
        self._register_backward_hooks()

    def forward(self, x):
        pred = self.nn(x)
        return pred

    def _register_backward_hooks(self):
        def hook(module, grad_input, grad_output):
            return None

        self.nn.register_full_backward_hook(hook)


model = TestModel(1000, 1000).cuda()
for step in range(1000):
    x = torch.randn(64, 1000, device="cuda")
    loss = model(x).sum()
    loss.backward(create_graph=True)  # expect: GL105
    for p in model.parameters():
        p.grad = None
