import torch
from torch import autograd


def hessian_vector(model, batch, vector, create=True):
    loss = model(batch).sum()
    autograd.backward(loss, create_graph=create)  # expect: GL105
    grads = [p.grad for p in model.parameters()]
    return sum((g * v).sum() for g, v in zip(grads, vector))


def curvature(model, loader, vector):
    return [hessian_vector(model, batch, vector) for batch in loader]
