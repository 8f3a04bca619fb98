import torch

activations = []


def save_activation(module, inputs, output):
    activations.append(output)  # expect: GL202


model = build_model().cuda()
model.layer4.register_forward_hook(save_activation)
