import torch

activation = {}


def get_activation(name):
    def hook(model, input, output):
        activation[name] = output.detach()

    return hook


model = build_model().cuda()
model.fc2.register_forward_hook(get_activation("fc2"))
