import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4096, 4096)

        def scale(x):
            return x * self.body.weight.norm()

        self.scale = scale  # expect: GL207


for trial in range(20):
    net = Net().cuda()
