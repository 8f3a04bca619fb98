# Source: https://androidkt.com/how-to-calculate-running-loss-using-loss-item-in-pytorch/
# Reported: running loss computed as running_loss += loss.item() * inputs.size(0).
# Label: clean. Only Python floats are accumulated.
import torch


def train_model(model, criterion, optimizer, scheduler, dataloaders, dataset_sizes, device, num_epochs=10):
    for epoch in range(num_epochs):
        print(f"Epoch {epoch}/{num_epochs - 1}")
        model.train()
        running_loss = 0.0
        running_corrects = 0
        for inputs, labels in dataloaders:
            inputs = inputs.to(device)
            labels = labels.to(device)
            optimizer.zero_grad()
            outputs = model(inputs)
            _, preds = torch.max(outputs, 1)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item() * inputs.size(0)
            running_corrects += torch.sum(preds == labels.data)
        scheduler.step()
        epoch_loss = running_loss / dataset_sizes
        epoch_acc = running_corrects.double() / dataset_sizes
        print(f"Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}")
    return model
