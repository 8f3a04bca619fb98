# Source: https://github.com/pytorch/pytorch/issues/13613 (comment by iammarvelous, 2018-11-06)
# Reported: "This happens when conducting massive inference ... result.append(output.data.cpu()
#   .numpy())"; the maintainer pointed at the DataLoader workers, not at this loop.
# Label: clean. Only host NumPy arrays of the outputs' data (no graph) are kept.
import torch
import torchvision

model = torchvision.models.resnet50()
model = torch.nn.DataParallel(model)
model.cuda()
model.eval()
result = []
for input in dataloader:
    output = model(input)
    result.append(output.data.cpu().numpy())
