# Source: https://github.com/NVIDIA-AI-IOT/jetbot/pull/117 ("Fix GPU memory leaks."), commit
#   https://github.com/NVIDIA-AI-IOT/jetbot/commit/db2756a982e9e3b6c56c942549c1c58fcc168a9e;
#   notebook notebooks/road_following/train_model.ipynb before that commit: its code cells, in
#   order, joined as one file (markdown cells left out; the `!unzip` shell cell cut)
# Reported: "I can not train many image(in my situation, over 400 images) because GPU memory leaks
#   on Jetson nano. ... Because, calculating total loss is using Tensor on GPU memory. The memory
#   can not free in a epoch. Thus , I added float() method when calculate \"train_loss\" and
#   \"test loss\"."
# Pattern: two epoch accumulators of CUDA loss tensors. The evaluation loop runs without
#   torch.no_grad(), so every `loss` carries the graph of its forward pass (activations of the
#   resnet18), and `test_loss += loss` keeps all of them alive until the epoch ends;
#   `best_loss = test_loss` then keeps the last best one across epochs (both `# leak`).
#   `train_loss += loss` chains every step's loss node into one tensor for the epoch
#   (`# leak:2`).
# Label: lines marked `# leak` keep the memory
import torch
import torch.optim as optim
import torch.nn.functional as F
import torchvision
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms
import glob
import PIL.Image
import os
import numpy as np


# (... cut: the shell cell that unzips the dataset)


def get_x(path):
    """Gets the x value from the image filename"""
    return (float(int(path[3:6])) - 50.0) / 50.0

def get_y(path):
    """Gets the y value from the image filename"""
    return (float(int(path[7:10])) - 50.0) / 50.0

class XYDataset(torch.utils.data.Dataset):
    
    def __init__(self, directory, random_hflips=False):
        self.directory = directory
        self.random_hflips = random_hflips
        self.image_paths = glob.glob(os.path.join(self.directory, '*.jpg'))
        self.color_jitter = transforms.ColorJitter(0.3, 0.3, 0.3, 0.3)
    
    def __len__(self):
        return len(self.image_paths)
    
    def __getitem__(self, idx):
        image_path = self.image_paths[idx]
        
        image = PIL.Image.open(image_path)
        x = float(get_x(os.path.basename(image_path)))
        y = float(get_y(os.path.basename(image_path)))
        
        if float(np.random.rand(1)) > 0.5:
            image = transforms.functional.hflip(image)
            x = -x
        
        image = self.color_jitter(image)
        image = transforms.functional.resize(image, (224, 224))
        image = transforms.functional.to_tensor(image)
        image = image.numpy()[::-1].copy()
        image = torch.from_numpy(image)
        image = transforms.functional.normalize(image, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        
        return image, torch.tensor([x, y]).float()
    
dataset = XYDataset('dataset_xy', random_hflips=False)


test_percent = 0.1
num_test = int(test_percent * len(dataset))
train_dataset, test_dataset = torch.utils.data.random_split(dataset, [len(dataset) - num_test, num_test])


train_loader = torch.utils.data.DataLoader(
    train_dataset,
    batch_size=16,
    shuffle=True,
    num_workers=4
)

test_loader = torch.utils.data.DataLoader(
    test_dataset,
    batch_size=16,
    shuffle=True,
    num_workers=4
)


model = models.resnet18(pretrained=True)


model.fc = torch.nn.Linear(512, 2)
device = torch.device('cuda')
model = model.to(device)


NUM_EPOCHS = 70
BEST_MODEL_PATH = 'best_steering_model_xy.pth'
best_loss = 1e9

optimizer = optim.Adam(model.parameters())

for epoch in range(NUM_EPOCHS):
    
    model.train()
    train_loss = 0.0
    for images, labels in iter(train_loader):
        images = images.to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        outputs = model(images)
        loss = F.mse_loss(outputs, labels)
        train_loss += loss  # leak:2
        loss.backward()
        optimizer.step()
    train_loss /= len(train_loader)
    
    model.eval()
    test_loss = 0.0
    for images, labels in iter(test_loader):
        images = images.to(device)
        labels = labels.to(device)
        outputs = model(images)
        loss = F.mse_loss(outputs, labels)
        test_loss += loss  # leak
    test_loss /= len(test_loader)
    
    print('%f, %f' % (train_loss, test_loss))
    if test_loss < best_loss:
        torch.save(model.state_dict(), BEST_MODEL_PATH)
        best_loss = test_loss  # leak
