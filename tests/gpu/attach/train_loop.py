"""A PyTorch training job started without gpuleak, for `gpuleak attach` on the GPU.

    train_loop.py MODE STEPS READY_FILE

MODE `leak` keeps each step's loss tensor (and so its autograd graph) in a list, the
classic `total_loss += loss` family; `clean` keeps loss.item(). Prints one line per step,
`STEP {"step", "loss", "step_ms"}`, so a run with an attach in the middle can be compared
with one without (same losses; step time after the detach). Writes READY_FILE (its pid)
once 20 steps ran.
"""
import json
import os
import sys
import time

import torch

mode, steps, ready_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
device = "cuda"
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
data = torch.randn(64, 512, device=device)
target = torch.randn(64, 512, device=device)
history = []
for step in range(steps):
    started = time.perf_counter()
    loss = torch.nn.functional.mse_loss(model(data), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if mode == "leak":
        history.append(loss)  # keeps the autograd graph of every step
    else:
        history.append(loss.item())
    value = float(loss.item())
    torch.cuda.synchronize()
    time.sleep(0.01)  # a job of ~60 steps/s
    print(
        "STEP " + json.dumps({"step": step, "loss": value, "step_ms": (time.perf_counter() - started) * 1000}),
        flush=True,
    )
    if step == 20:
        with open(ready_file + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(ready_file + ".tmp", ready_file)
