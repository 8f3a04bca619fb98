import torch


def check_finite(module, inputs, output):
    bad = []
    for t in output:
        bad.append(t)
    if any(not torch.isfinite(t).all() for t in bad):
        raise RuntimeError("non-finite output")


model = build_model().cuda()
model.register_forward_hook(check_finite)
