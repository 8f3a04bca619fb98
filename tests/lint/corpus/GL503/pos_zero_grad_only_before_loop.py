import torch

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
optimizer.zero_grad()
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()  # expect: GL503
