# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/71 (activations_and_gradients.py at 278c9cd)
# Reported: "Activations and gradients are getting accumulated in cuda device memory. better to do
#   self.activations.append(output.cpu().data.numpy())".
# Label: clean. __call__ replaces both lists before every forward pass, so each call keeps only
#   its own activations and gradients.
import torch


class ActivationsAndGradients:
    """Class for extracting activations and registering gradients from targetted intermediate layers"""

    def __init__(self, model, target_layer):
        self.model = model
        self.gradients = []
        self.activations = []
        target_layer.register_forward_hook(self.save_activation)
        target_layer.register_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        self.activations.append(output)

    def save_gradient(self, module, grad_input, grad_output):
        # Gradients are computed in reverse order
        self.gradients = [grad_output[0]] + self.gradients

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)


def cam_for_images(model, target_layer, images):
    extractor = ActivationsAndGradients(model, target_layer)
    cams = []
    for image in images:
        output = extractor(image.cuda())
        model.zero_grad()
        output[0, output.argmax()].backward()
        weights = extractor.gradients[-1].mean(dim=(2, 3), keepdim=True)
        cam = (weights * extractor.activations[-1]).sum(dim=1)
        cams.append(cam.detach().cpu().numpy())
    return cams
