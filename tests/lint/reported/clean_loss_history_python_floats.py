# Source: https://theneuralbase.com/pytorch/learn/intermediate/memory-leak-detection/
# Reported: "PRODUCTION PATTERN: Loss logging without leaks ... loss_history.append(loss.item())
#   # NOT loss or loss.detach()".
# Label: clean. The history holds Python floats.
import torch

device = torch.device("cuda")
model = torch.nn.Linear(1000, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 1000, device=device)

loss_history = []  # Will hold scalars, not tensors
for i in range(100):
    loss = model(x).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    loss_history.append(loss.item())
print(torch.cuda.memory_allocated(device))
