# Source: https://github.com/pytorch/pytorch/issues/2302 ("Out of memory when extract features from
#   pictures, only on ubuntu."), the code of the report
# Reported: "I use res152-net to extract features from pictures, but with an 8G memory ubuntu PC,
#   can only extract less than 30 pics and my PC will crash with 8G + 8G(swap) memory full."
#   Answer: "Do not store classification in the Variable pos1. This may prevent PyTorch from
#   releasing memory."
# Pattern: a history grown with torch.cat: every image's features come from the ResNet-152 with
#   the graph recorded (plain Variables, nothing volatile or under no_grad), and
#   `pos1 = torch.cat((pos1, f))` keeps the previous pos1 and f in the new tensor's graph, so all
#   activations of every image seen so far stay alive. (The reporter ran on the CPU; the model's
#   device does not change what is kept.)
# Label: lines marked `# leak` keep the memory
import os

import torch
import torchvision
from torch import nn
from torch.autograd import Variable
from tqdm import tqdm

from dataset import DATASET

mydata = DATASET(os.getcwd())
model = torchvision.models.resnet152(pretrained=True)
new_classifier = nn.Sequential(*list(model.children())[:-1])
model.classifier = new_classifier
model.eval()

pos1 = model(Variable(mydata[0][0].view(1, 3, 224, 224)))
for index in tqdm(range(1, 1000)):
    f = model(Variable(mydata[index][0].view(1, 3, 224, 224)))
    pos1 = torch.cat((pos1, f))  # leak

with open('pos1_fea.pt', 'wb') as f:
    torch.save(pos1, f)
