import weakref

import torch


class AttributionHook:
    def pre_forward(self, module, input):
        hook_ref = weakref.ref(self)

        def on_grad(grad_input, grad_output):
            return hook_ref().relevance(module, grad_input)

        marked = input[0].clone()
        marked.grad_fn.register_hook(on_grad)
        return (marked,)

    def relevance(self, module, grad_input):
        return grad_input


class EpsilonHook(AttributionHook):
    def forward(self, module, input, output):
        self.saved_input = input
