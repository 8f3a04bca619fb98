# Source: https://github.com/rballester/tntorch/pull/19 (tntorch/tensor.py, optimize())
# Reported: "There was a dangerous memory leak in loss_history. Every added loss used to be a full
#   computational graph, and in 1000 iterations it frozen a PC with 12Gb RAM."
# Pattern: an optimisation loop appends every total loss (graph retained) to a history list.
# Label: the line marked `# leak` keeps the memory.
import time

import torch
import tntorch as tn


def optimize(tensors, loss_function, optimizer=torch.optim.Adam, tol=1e-4, max_iter=1e4, print_freq=500, verbose=True):
    if not isinstance(tensors, (list, tuple)):
        tensors = [tensors]
    parameters = []
    for t in tensors:
        if isinstance(t, tn.Tensor):
            parameters.extend([c for c in t.cores if c.requires_grad])
        elif t.requires_grad:
            parameters.append(t)
    optimizer = optimizer(parameters)
    losses = []
    start = time.time()
    iter = 0
    while True:
        optimizer.zero_grad()
        loss = loss_function(*tensors)
        if not isinstance(loss, (tuple, list)):
            loss = [loss]
        total_loss = sum(loss)
        total_loss.backward(retain_graph=True)
        optimizer.step()

        losses.append(total_loss)  # leak

        if len(losses) >= 2:
            delta_loss = losses[-1] - losses[-2]
        else:
            delta_loss = float("-inf")
        if iter >= 2 and tol is not None and (losses[-1] <= tol or -delta_loss / losses[-1] <= tol):
            break
        if iter == max_iter:
            break
        if verbose and iter % print_freq == 0:
            print("iter: {} | loss: {:10.6f} | total time: {:9.4f}".format(iter, losses[-1].item(), time.time() - start))
        iter += 1
