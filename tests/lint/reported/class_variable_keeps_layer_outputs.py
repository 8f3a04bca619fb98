# Source: https://discuss.pytorch.org/t/cuda-out-of-memory-error-understanding-how-pytorch-stores-class-variable/13778
# Reported: "trying to save intermediate output to a class variable ... I assumed
#   Bottleneck.out_saved[self.counter] is saved in main memory instead of GPU. But I am getting an
#   memory out of error".
# Pattern: a class-level list keeps one graph-carrying output per training batch of the epoch.
# Label: the line marked `# leak` keeps the memory.
import torch
import torch.nn as nn
import torch.nn.functional as F


class DenseNet(nn.Module):
    freezeLayerIndex = 0


class Bottleneck(nn.Module):
    out_saved = [0] * 900

    def __init__(self, nChannels, growthRate, layer_index, train_size, test_size, batch_sz):
        super(Bottleneck, self).__init__()
        interChannels = 4 * growthRate
        self.bn1 = nn.BatchNorm2d(nChannels)
        self.conv1 = nn.Conv2d(nChannels, interChannels, kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(interChannels)
        self.conv2 = nn.Conv2d(interChannels, growthRate, kernel_size=3, padding=1, bias=False)
        self.active = True
        self.layer_index = layer_index
        self.counter = 0
        self.maxCounter = train_size // batch_sz
        if train_size % batch_sz != 0:
            self.maxCounter += 1

    def forward(self, x):
        if not self.active:
            self.eval()
        if self.active:
            out = self.conv1(F.relu(self.bn1(x)))
            out = self.conv2(F.relu(self.bn2(out)))
            out = torch.cat((x, out), 1)
            if self.layer_index < DenseNet.freezeLayerIndex:
                Bottleneck.out_saved[self.counter] = out  # leak
                self.counter += 1
                if self.counter >= self.maxCounter:
                    self.counter = 0
                    self.active = False
            return out
        else:
            detach = Bottleneck.out_saved[self.counter].detach()
            self.counter += 1
            if self.counter >= self.maxCounter:
                self.counter = 0
            return detach
