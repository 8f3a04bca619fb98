#!/usr/bin/env python3
"""Writes one large, valid Python file of a chosen size for `gpuleak lint` scaling runs.

Two shapes, because the linter's work is organised per function and per loop:

- `many-functions`: the file is made of small training-style functions (a loop, a loss, a
  backward, a list that grows), one after the other;
- `one-function`: the same statements all inside ONE function and ONE loop, so every
  per-scope or per-loop step sees the whole file.

Usage:
    python3 bench/lint/make_large_python_file.py --shape one-function --mb 5 --out /tmp/big.py
"""
import argparse


def function_text(index):
    return (
        f"def train_{index}(model, loader, optimizer, criterion):\n"
        f"    losses_{index} = []\n"
        f"    for x, y in loader:\n"
        f"        optimizer.zero_grad()\n"
        f"        out_{index} = model(x.cuda())\n"
        f"        loss_{index} = criterion(out_{index}, y.cuda())\n"
        f"        loss_{index}.backward()\n"
        f"        optimizer.step()\n"
        f"        losses_{index}.append(loss_{index}.item())\n"
        f"    return losses_{index}\n\n\n"
    )


def loop_body_text(index):
    return (
        f"        out_{index} = model(x.cuda()) * {index}\n"
        f"        loss_{index} = criterion(out_{index}, y.cuda())\n"
        f"        total_{index % 97} = loss_{index}.item() + {index}\n"
        f"        if total_{index % 97} > {index}:\n"
        f"            stats['k{index % 13}'] = float(total_{index % 97})\n"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["many-functions", "one-function"], required=True)
    parser.add_argument("--mb", type=float, required=True, help="size in MB (10^6 bytes)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    target = int(args.mb * 1_000_000)
    parts = ["import torch\n\n\n"]
    size = len(parts[0])
    if args.shape == "one-function":
        head = "def train(model, loader, optimizer, criterion, stats):\n    for x, y in loader:\n"
        parts.append(head)
        size += len(head)
    index = 0
    while size < target:
        text = function_text(index) if args.shape == "many-functions" else loop_body_text(index)
        parts.append(text)
        size += len(text)
        index += 1
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("".join(parts))


if __name__ == "__main__":
    main()
