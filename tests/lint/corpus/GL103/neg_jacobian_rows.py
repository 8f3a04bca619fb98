import torch


def jacobian(model, x):
    x.requires_grad_(True)
    y = model(x)
    rows = []
    for i in range(y.shape[0]):
        (grad,) = torch.autograd.grad(y[i], x, retain_graph=True)
        rows.append(grad)
    return torch.stack(rows)
