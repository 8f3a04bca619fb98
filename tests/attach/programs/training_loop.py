"""A training loop started without gpuleak, for `gpuleak attach` to join.

    training_loop.py STEPS KEEP_EVERY EXIT_STATUS

Each step makes a scratch tensor that it frees, steps an optimizer, and,
every KEEP_EVERY-th step (0: never), keeps a stand-in GPU tensor in a list
for good: the leak. It prints `ready` once the loop runs, a checksum of its
own computation at the end, and exits with EXIT_STATUS.
"""
import sys
import time

import torch

from stand_in_gpu import gpu_tensor

steps, keep_every, exit_status = (int(a) for a in sys.argv[1:4])
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs = torch.randn(16, 8)
history = []
for step in range(steps):
    scratch = gpu_tensor(1 << 14)
    if keep_every and step % keep_every == 0:
        history.append(gpu_tensor(1 << 12))  # the keeping line
    loss = model(inputs).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del scratch
    if step == 0:
        print("ready", flush=True)
    time.sleep(0.01)
print("loss %.6f kept %d" % (loss.item(), len(history)), flush=True)
sys.exit(exit_status)
