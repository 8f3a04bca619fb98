import torch


def predict(net, loader):
    net.eval()
    results = {}
    for batch_idx, batch in enumerate(loader):
        results[batch_idx] = net(batch)  # expect: GL102
    return results
