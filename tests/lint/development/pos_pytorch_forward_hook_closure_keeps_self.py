# Source: https://github.com/pytorch/pytorch/issues/46386 (open, no fix committed), the reproduction of the report
# Reported: "I found a GPU memory leak (or better to say garbage collection issue) when I register a function with `self` access as a forward hook in a module. This problem happened when I was iteratively instantiating my module without even calling the forward function."
# Pattern: __init__ registers a nested function that uses `self` as a forward hook on the module itself and throws the handle away; the module's hook dict holds the closure, the closure holds the module: a reference cycle that only the cycle collector frees, so every instance made in the loop keeps its GPU parameters until then.
# Label: lines marked `# leak` keep the memory
import torch
import torchvision.models as models
import torch.nn as nn

class LeakyModule(nn.Module):
    def __init__(self):
        super(LeakyModule, self).__init__()
        self.resnet = models.resnet152()
        
        def fw_hook(m, m_in, m_out):
            self(m_in)

        self.register_forward_hook(fw_hook)  # leak

for i in range(1000):
    net = LeakyModule()
    net.to('cuda:0')
    # (... cut: the report's print of the allocated memory)
