#!/usr/bin/env python3
"""Does `backward(create_graph=True)` leak when the loop clears gradients? (GL105)

Trains a small MLP on the CPU with `loss.backward(create_graph=True)` for 901 steps and prints
the process's resident memory every 150 steps, in four loops:
  none            no zero_grad(): each parameter's .grad keeps a graph that references the
                  parameter (the cycle PyTorch warns about), and every step adds to it
  zero_grad       optimizer.zero_grad() each step (set_to_none, the default since torch 2.0)
  zero_grad_keep  optimizer.zero_grad(set_to_none=False) each step (detaches, then zeroes)
  input_leaf      zero_grad() each step, but an input is made a leaf (requires_grad_) each
                  step, as a gradient penalty does: the optimizer never clears its .grad

    /usr/bin/python3 bench/lint/create_graph_cycle.py [LOOP]
"""
import gc
import subprocess
import sys

import torch


def resident_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def run(loop, steps=901, every=150):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.Tanh(), torch.nn.Linear(2048, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, 512)
    marks = []
    for step in range(steps):
        if loop == "zero_grad":
            optimizer.zero_grad()
        elif loop == "zero_grad_keep":
            optimizer.zero_grad(set_to_none=False)
        if loop == "input_leaf":
            real = torch.randn(64, 512).requires_grad_(True)
            score = model(real).sum()
            score.backward(create_graph=True)
            penalty = (real.grad.norm(2, dim=1) - 1).pow(2).mean()
            optimizer.zero_grad()
            penalty.backward()
        else:
            model(x).pow(2).mean().backward(create_graph=True)
        optimizer.step()
        if step % every == 0:
            gc.collect()
            marks.append(round(resident_mib(), 1))
    return marks


def main():
    if len(sys.argv) > 1:  # one loop, in a process of its own (resident memory is not given back)
        loop = sys.argv[1]
        print("%-15s %s" % (loop, run(loop, steps=301 if loop == "none" else 901)), flush=True)
        return
    print("torch", torch.__version__, "; resident MiB every 150 steps, each loop in its own process")
    for loop in ("none", "zero_grad", "zero_grad_keep", "input_leaf"):
        subprocess.run([sys.executable, "-W", "ignore", __file__, loop], check=True)


if __name__ == "__main__":
    main()
