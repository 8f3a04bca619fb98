"""accelerate: gathered predictions and labels kept on the GPU for an end-of-run metric.

Reported: https://github.com/huggingface/accelerate/issues/226 ("It stores
predictions/labels at each step to eventually compute accuracy once at the
end ... At each step, accelerator.gather() is used").

Every training step appends `accelerator.gather(...)` of the batch's
probabilities (256 x 512 float32, 512 KiB) and labels to lists that live
until the end of training.

    python3 leak_gathered_predictions.py --steps 200 [--device cuda|cpu]

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
    all_probabilities, all_labels = [], []
    step = 0
    while step < args.steps:
        for x, y in loader:
            started = time.perf_counter()
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            probabilities, labels = accelerator.gather((logits.detach().softmax(-1), y))
            all_probabilities.append(probabilities)  # LEAK: tensors-kept-alive
            all_labels.append(labels)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            step += 1
            print("CLIENT_STEP " + json.dumps({"step": step, "loss": loss.item(),
                                               "step_ms": (time.perf_counter() - started) * 1e3}),
                  flush=True)
            if step == args.steps:
                break
    accuracy = (torch.cat(all_probabilities).argmax(-1) == torch.cat(all_labels)).float().mean()
    print("accuracy %.4f" % accuracy.item())


if __name__ == "__main__":
    main()
