# Source: https://taourl.com/read-2585557.html
# Reported: "Training loop with potential memory leak ... memory usage increases because PyTorch's
#   computation graph retains references to intermediate tensors".
# Label: clean. Nothing outlives an iteration: loss and output are rebound every batch and only
#   loss.item() is printed.
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

X = torch.randn(10000, 100)
y = torch.randint(0, 2, (10000,))
dataset = TensorDataset(X, y)
loader = DataLoader(dataset, batch_size=32, shuffle=True)

model = nn.Sequential(nn.Linear(100, 50), nn.ReLU(), nn.Linear(50, 1), nn.Sigmoid())
optimizer = optim.Adam(model.parameters())
criterion = nn.BCELoss()

for epoch in range(100):
    for batch_X, batch_y in loader:
        optimizer.zero_grad()
        output = model(batch_X)
        loss = criterion(output, batch_y.float().unsqueeze(1))
        loss.backward()
        optimizer.step()
    print(f"Epoch {epoch}, Loss: {loss.item()}")
