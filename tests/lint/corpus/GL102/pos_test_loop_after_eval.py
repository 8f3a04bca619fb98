import torch


def run(model, test_loader):
    model.eval()
    all_logits = []
    all_labels = []
    for images, labels in test_loader:
        out = model(images)
        all_logits.append(out)  # expect: GL102
        all_labels.append(labels)
    return torch.cat(all_logits), torch.cat(all_labels)
