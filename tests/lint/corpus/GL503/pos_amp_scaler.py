import torch


def train(model, loader, optimizer, criterion):
    scaler = torch.cuda.amp.GradScaler()
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # expect: GL503
        scaler.update()
