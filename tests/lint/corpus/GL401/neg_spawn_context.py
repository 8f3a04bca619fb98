import multiprocessing
import torch


def main():
    model = build().cuda()
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=evaluate_checkpoints, daemon=True)
    p.start()
    train(model)
