import torch
import torch.nn as nn


def train(model, train_data, bptt, optimizer, ntokens):
    criterion = nn.NLLLoss()
    hidden = model.init_hidden(20)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        optimizer.zero_grad()
        output, hidden = model(data, hidden)  # expect: GL104
        loss = criterion(output.view(-1, ntokens), targets)
        loss.backward()
        optimizer.step()
