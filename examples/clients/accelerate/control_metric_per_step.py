"""accelerate control: gather_for_metrics every step, counts kept as Python numbers.

Reported: the answer in https://github.com/huggingface/accelerate/issues/574
("Calling compute() resets the stored predictions"; use gather_for_metrics),
following accelerate's examples/by_feature/multi_process_metrics.py.

Each step gathers the predictions, turns them into two Python integers
(correct, seen) and drops the tensors. GPU memory is flat after warm-up.

    python3 control_metric_per_step.py --steps 200 [--device cuda|cpu]

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per optimizer step.
"""
import argparse
import json
import time

import torch
from accelerate import Accelerator


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=args.device == "cpu")
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 512))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(256 * 20, 128), torch.randint(0, 512, (256 * 20,)))
    loader = torch.utils.data.DataLoader(data, batch_size=256)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    correct = seen = 0
    step = 0
    while step < args.steps:
        for x, y in loader:
            started = time.perf_counter()
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            predictions, labels = accelerator.gather_for_metrics((logits.detach().argmax(-1), y))
            correct += int((predictions == labels).sum())
            seen += labels.numel()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            step += 1
            print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                               "step_ms": (time.perf_counter() - started) * 1e3}),
                  flush=True)
            if step == args.steps:
                break
    print("accuracy %.4f" % (correct / max(seen, 1)))


if __name__ == "__main__":
    main()
