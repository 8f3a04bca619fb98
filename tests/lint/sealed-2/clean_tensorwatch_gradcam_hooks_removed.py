# Source: https://github.com/microsoft/tensorwatch/pull/74 (fixes issue #73), files
#   tensorwatch/saliency/gradcam.py (whole), VanillaGradExplainer from tensorwatch/saliency/backprop.py
#   and get_saliency / get_image_saliency_results from tensorwatch/saliency/saliency.py, after the
#   fix (commit 8e81b68ce3eb772466ec01f00e4968656e1f1977; _get_explainer cut to its gradcam and
#   vanilla_grad branches, the other explainers' imports cut)
# Reported: GPU memory grew with every prediction run after gradcam, because the hooks that
#   gradcam registered stayed on the model.
# Pattern: the explainer keeps the two hook handles (self.handle_forward_hook,
#   self.handle_backward_hook) and removes both right after its one backward pass in explain(), so
#   later forward passes no longer append activations; the lists are reset at each explain().
# Label: control: nothing here keeps GPU memory across calls
import torch
import math
import skimage.transform
from .. import image_utils


class VanillaGradExplainer(object):
    def __init__(self, model):
        self.model = model

    def _backprop(self, inp, ind):
        inp.requires_grad = True
        if inp.grad is not None:
            inp.grad.zero_()
        if ind.grad is not None:
            ind.grad.zero_()
        self.model.eval()
        self.model.zero_grad()

        output = self.model(inp)
        if ind is None:
            ind = output.max(1)[1]
        grad_out = output.clone()
        grad_out.fill_(0.0)
        grad_out.scatter_(1, ind.unsqueeze(0).t(), 1.0)
        output.backward(grad_out)
        return inp.grad

    def explain(self, inp, ind=None, raw_inp=None): 
        return self._backprop(inp, ind)


def _get_layer(model, key_list):
    if key_list is None:
        return None

    a = model
    for key in key_list:
        a = a._modules[key]

    return a

class GradCAMExplainer(VanillaGradExplainer):
    def __init__(self, model, target_layer_name_keys=None, use_inp=False):
        super(GradCAMExplainer, self).__init__(model)
        self.target_layer = _get_layer(model, target_layer_name_keys)
        self.use_inp = use_inp
        self.intermediate_act = []
        self.intermediate_grad = []
        self.handle_forward_hook = None
        self.handle_backward_hook = None
        self._register_forward_backward_hook()

    def _register_forward_backward_hook(self):
        def forward_hook_input(m, i, o):
            self.intermediate_act.append(i[0].data.clone())
        
        def forward_hook_output(m, i, o):
            self.intermediate_act.append(o.data.clone())
            
        def backward_hook(m, grad_i, grad_o):
            self.intermediate_grad.append(grad_o[0].data.clone())

        if self.target_layer is not None:
            if self.use_inp:
                self.handle_forward_hook = self.target_layer.register_forward_hook(forward_hook_input)
            else:
                self.handle_forward_hook = self.target_layer.register_forward_hook(forward_hook_output)
            
            self.handle_backward_hook = self.target_layer.register_backward_hook(backward_hook)

    def _reset_intermediate_lists(self):
        self.intermediate_act = []
        self.intermediate_grad = []

    def explain(self, inp, ind=None, raw_inp=None):
        self._reset_intermediate_lists()
        _ = super(GradCAMExplainer, self)._backprop(inp, ind)
        self.handle_forward_hook.remove()
        self.handle_backward_hook.remove()
        if len(self.intermediate_grad):
            grad = self.intermediate_grad[0]
            act = self.intermediate_act[0]
            
            weights = grad.sum(-1).sum(-1).unsqueeze(-1).unsqueeze(-1)
            cam = weights * act
            cam = cam.sum(1).unsqueeze(1)

            cam = torch.clamp(cam, min=0)
            return cam
        else:
            return None


class ImageSaliencyResult:
    def __init__(self, raw_image, saliency, title, saliency_alpha=0.4, saliency_cmap='jet'):
        self.raw_image, self.saliency, self.title = raw_image, saliency, title
        self.saliency_alpha, self.saliency_cmap = saliency_alpha, saliency_cmap

def _get_explainer(explainer_name, model, layer_path=None):
    if explainer_name == 'gradcam':
        return GradCAMExplainer(model, target_layer_name_keys=layer_path, use_inp=True)
    if explainer_name == 'vanilla_grad':
        return VanillaGradExplainer(model)

    raise ValueError('Explainer {} is not recognized'.format(explainer_name))

def _get_layer_path(model):
    if model.__class__.__name__ == 'VGG':
        return ['features', '30'] # pool5
    elif model.__class__.__name__ == 'GoogleNet':
        return ['pool5']
    elif model.__class__.__name__ == 'ResNet':
        return ['avgpool'] #layer4
    elif model.__class__.__name__ == 'Inception3':
        return ['Mixed_7c', 'branch_pool'] # ['conv2d_94'], 'mixed10'
    else: #TODO: guess layer for other networks?
        return None

def get_saliency(model, raw_input, input, label, method='integrate_grad', layer_path=None):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    model.to(device)
    input = input.to(device)
    if label is not None:
        label = label.to(device)

    if input.grad is not None:
        input.grad.zero_()
    if label is not None and label.grad is not None:
        label.grad.zero_()
    model.eval()
    model.zero_grad()

    layer_path = layer_path or _get_layer_path(model)

    exp = _get_explainer(method, model, layer_path)
    saliency = exp.explain(input, label, raw_input)

    if saliency is not None:
        saliency = saliency.abs().sum(dim=1)[0].squeeze()
        saliency -= saliency.min()
        saliency /= (saliency.max() + 1e-20)

        return saliency.detach().cpu().numpy()
    else:
        return None

def get_image_saliency_results(model, raw_image, input, label,
                               methods=['lime_imagenet', 'gradcam', 'smooth_grad',
                                        'guided_backprop', 'deeplift', 'grad_x_input'], 
                               layer_path=None):
    results = []
    for method in methods:
        sal = get_saliency(model, raw_image, input, label, method=method)

        if sal is not None:
            results.append(ImageSaliencyResult(raw_image, sal, method))
    return results
