import torch
import torch.nn as nn

model = build_model().cuda()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(epochs):
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

    model.eval()
    val_loss = 0
    for x, y in val_loader:
        val_loss += criterion(model(x), y)  # expect: GL102
    print(epoch, val_loss.item() / len(val_loader))
