import torch
from torch.utils.data import DataLoader, Dataset


class ImageDataset(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        image = load_image(self.paths[idx])
        return torch.from_numpy(image).cuda()  # expect: GL301


loader = DataLoader(ImageDataset(paths), batch_size=32, num_workers=4)
