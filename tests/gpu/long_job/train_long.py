"""A launch-bound training loop that runs for a given time: thousands of
tensor allocations a second, for tests/gpu/suites/long-job.sh.

    python3 train_long.py SECONDS leak|clean

`leak` keeps one 4 KiB tensor every step (the line marked LEAK below);
`clean` keeps nothing. Prints one JSON line: steps and seconds.
"""
import json
import sys
import time

import torch


def main():
    seconds, shape = float(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)]).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = torch.randn(8, 64, device="cuda")
    kept = []
    steps = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        loss = model(batch).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if shape == "leak":
            kept.append(torch.empty(1024, device="cuda"))  # LEAK: 4 KiB kept every step
        steps += 1
    torch.cuda.synchronize()
    print(json.dumps({"steps": steps, "seconds": time.monotonic() - start}))


if __name__ == "__main__":
    main()
