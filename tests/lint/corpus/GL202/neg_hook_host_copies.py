import torch

saved = []


def hook(module, inputs, output):
    saved.append(output.detach().cpu())


model = build_model().cuda()
model.head.register_forward_hook(hook)
