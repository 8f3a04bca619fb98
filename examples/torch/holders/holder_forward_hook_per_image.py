"""A forward hook registered for every image and never removed.

Reported: https://github.com/utkuozbulak/pytorch-cnn-visualizations/issues/53
("register backward/forward hook seems to consume a lot of GPU memory" once
the visualisation runs over many images on the GPU: the hooks are registered
again for each image). The shape here: a saliency loop masks the first
convolution's output for each image; it registers a new forward hook per
image and drops the handle, so the hooks pile up in the layer's
`_forward_hooks`, each one a closure keeping that image's mask on the GPU
(64 x 112 x 112 float32 = 3 MiB per image).

Holder: the hook dict `_forward_hooks` of the Conv2d; each hook is a closure
of `saliency.<locals>.apply_mask` capturing `mask`.
Fix: keep the handle and call `handle.remove()` after each image (or register
the hook once and pass the mask through an attribute).
"""
import torch
from torch import nn

from case_options import mark_step, parse_args


def saliency(model, image, device):
    mask = (torch.rand(1, 64, 112, 112, device=device) > 0.5).float()

    def apply_mask(module, inputs, output):
        return output * mask

    model[0].register_forward_hook(apply_mask)  # KEPT: hook-registration
    with torch.no_grad():
        return model(image).softmax(1)


def run(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(device).eval()
    for _ in range(steps):
        image = torch.rand(1, 3, 224, 224, device=device)
        saliency(model, image, device)
        mark_step()
    return len(model[0]._forward_hooks)


def main():
    args = parse_args(__doc__)
    print("images=%d hooks=%d" % (args.steps, run(args.steps, args.device)))


if __name__ == "__main__":
    main()
