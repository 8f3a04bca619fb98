"""A data set whose __getitem__ is memoised with lru_cache(maxsize=None).

Reported: https://github.com/MoonshotAI/Kimi-Audio/issues/117
(`@lru_cache(maxsize=None) def __getitem__(self, i) -> Dict[str,
torch.Tensor]` in the fine-tuning data set "may cause memory leakage when
training data grows larger"). The shape is the report's, with the features
computed on the GPU (as a GPU feature extractor does): every new index adds
one item to the cache of the method, which lives on the class and is never
emptied (80 x 3000 float32 = 0.9 MiB per item). One epoch visits each index
once, so the cache grows through the whole epoch.

Holder: the cache of the lru_cache-wrapped `AudioDataset.__getitem__`
(attribute of class AudioDataset).
Fix: drop the cache (or bound it), and cache on the CPU if anything.
"""
import functools

import torch
from torch import nn

from case_options import parse_args

MELS, FRAMES = 80, 3000


class AudioDataset(torch.utils.data.Dataset):
    def __init__(self, size, device):
        self.size, self.device = size, device
        self.window = torch.hann_window(400, device=device)

    def __len__(self):
        return self.size

    @functools.lru_cache(maxsize=None)  # KEPT: lru-cache
    def __getitem__(self, i):
        generator = torch.Generator(device=self.device).manual_seed(i)
        features = torch.randn(MELS, FRAMES, device=self.device, generator=generator)
        return {"input_features": features, "labels": torch.tensor(i % 10, device=self.device)}


def train(steps, device):
    torch.manual_seed(0)
    dataset = AudioDataset(steps, device)
    model = nn.Sequential(nn.Flatten(0), nn.Linear(MELS * FRAMES, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for index in range(len(dataset)):
        item = dataset[index]
        loss = nn.functional.cross_entropy(model(item["input_features"])[None], item["labels"][None])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
