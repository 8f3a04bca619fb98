# Source: https://github.com/pytorch/pytorch/issues/82528
# Reported: "a memory leak in PyTorch associated to 2 conditions: 1. Backprop is computed via
#   loss.backward(create_graph=True) 2. A handle is registered via register_full_backward_hook ...
#   until the GPU runs out of memory (8GB after ca. 12 epochs)".
# Pattern: second-order training loop calling backward(create_graph=True) on the model's loss.
# Label: the line marked `# leak` keeps the memory.
import torch
from torch.nn import CrossEntropyLoss, Flatten, Linear, Sequential

device = torch.device("cuda:0")
model = Sequential(Flatten(), Linear(784, 10)).to(device)
loss_function = CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def backward_hook(module, grad_input, grad_output):
    pass


for layer in model:
    layer.register_full_backward_hook(backward_hook)

for epoch in range(100):
    for X, y in train_loader:
        X, y = X.to(device), y.to(device)
        optimizer.zero_grad()
        loss = loss_function(model(X), y)
        loss.backward(create_graph=True)  # leak
        optimizer.step()
    print(epoch, torch.cuda.memory_allocated())
