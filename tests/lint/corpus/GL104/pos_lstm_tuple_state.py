import torch
import torch.nn as nn

lstm = nn.LSTM(64, 128, batch_first=True).cuda()
head = nn.Linear(128, 10).cuda()
optimizer = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()))
h = torch.zeros(1, 32, 128, device="cuda")
c = torch.zeros(1, 32, 128, device="cuda")

for x, y in loader:
    optimizer.zero_grad()
    out, (h, c) = lstm(x, (h, c))  # expect: GL104
    loss = nn.functional.cross_entropy(head(out[:, -1]), y)
    loss.backward(retain_graph=True)  # expect: GL103
    optimizer.step()
