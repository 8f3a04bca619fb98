# Source: https://errorcanon.top/errors/pytorch/dataset-worker-fork-cuda/
# Reported: "RuntimeError: Cannot re-initialize CUDA in forked subprocess ... when DataLoader
#   workers try to use CUDA"; with the spawn start method each worker then creates its own CUDA
#   context.
# Pattern: Dataset.__getitem__ moves samples to the GPU while num_workers > 0.
# Label: the line marked `# leak` keeps the memory (a context per worker process).
import torch
from torch.utils.data import DataLoader, Dataset


class CustomDataset(Dataset):
    def __init__(self, size=1000):
        self.data = torch.randn(size, 3, 224, 224)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx].cuda()  # leak


dataset = CustomDataset()
dataloader = DataLoader(dataset, batch_size=32, num_workers=4)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 224 * 224, 10)).cuda()
for batch in dataloader:
    output = model(batch)
