# Source: https://github.com/pytorch/pytorch/issues/7343
# Reported: "[memory leak] create_graph=True w/ custom grad ... leaks with y = x.tanh() but not
#   y = x + 1"; maintainers: "the reference cycle is x -> x.grad -> x.grad.grad_fn ->
#   x ... use torch.autograd.grad instead of Tensor.backward()".
# Pattern: backward(create_graph=True) on a leaf that requires grad: its .grad keeps a graph that
#   references the leaf itself, a cycle that is never collected.
# Label: the line marked `# leak` keeps the memory.
import gc

import torch

for step in range(100000):
    x = torch.randn(1, device="cuda", requires_grad=True)
    y = x.tanh()
    y.backward(torch.ones_like(y), create_graph=True)  # leak
    del x, y
    torch.cuda.synchronize()
    gc.collect()
    if step % 1000 == 0:
        print(torch.cuda.memory_allocated())
