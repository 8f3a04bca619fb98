import torch

outs = []
net = Net().cuda()
handle = net.fc.register_forward_hook(lambda m, i, o: outs.append(o))  # expect: GL202
