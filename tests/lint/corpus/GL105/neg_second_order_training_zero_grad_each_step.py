# Labelled a leak (pos_second_order_training.py) until 3 December 2026; relabelled on a
# measurement, not on gpuleak's answer: bench/lint/create_graph_cycle.py (torch 1.13, CPU)
# grows 16 MiB per step without zero_grad() and stays flat with it, with either
# set_to_none. zero_grad() resets each parameter's .grad at every step, which breaks the
# parameter -> .grad -> graph cycle; only parameters are leaves here.
import torch


def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward(create_graph=True)
        optimizer.step()
