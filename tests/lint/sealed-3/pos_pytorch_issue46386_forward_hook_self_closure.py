# Source: https://github.com/pytorch/pytorch/issues/46386 ("GPU memory when registering a forward
#   hook with "self" access"), the reproducer of the issue
# Reported: "I found a GPU memory leak (or better to say garbage collection issue) when I register
#   a function with `self` access as a forward hook in a module. This problem happened when I was
#   iteratively instantiating my module without even calling the forward function."
# Pattern: __init__ defines fw_hook as a closure over `self` and registers it on the module
#   itself: the module's _forward_hooks dict holds the closure, the closure holds the module, a
#   reference cycle. Every instance made in the loop (with a ResNet-152 moved to the GPU) stays
#   allocated after `net` is rebound, until Python's cycle collector happens to run; memory
#   climbs with the iterations.
# Label: lines marked `# leak` keep the memory
import torch
import torch.nn as nn
import torchvision.models as models


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
    print(f"iteration {i}: {torch.cuda.memory_allocated() / 1024 ** 2:.1f} MiB allocated")
