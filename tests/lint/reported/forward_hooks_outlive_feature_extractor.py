# Source: https://github.com/KamitaniLab/bdpy/issues/72 (bdpy/dl/torch/torch.py, fixed in PR #91)
# Reported: "the registered forward hooks are not erased after the reconstruct is returned and
#   feature_extractor is destroyed. This leads to a problem that the remaining forward hooks keep
#   accumulating features and occupy memory when the same encoder instance is used for reconstruct
#   multiple times."
# Pattern: every reconstruct() registers new forward hooks that append each module output to a
#   handle's list; the hooks are never removed, so the handles of earlier calls keep appending.
# Label: the lines marked `# leak` keep the memory.
import numpy as np
import torch


class FeatureExtractorHandle(object):
    def __init__(self):
        self.outputs = []

    def __call__(self, module, module_in, module_out):
        self.outputs.append(module_out)  # leak

    def clear(self):
        self.outputs = []


class FeatureExtractor(object):
    def __init__(self, encoder, layers=None, device="cpu", detach=True):
        self._encoder = encoder
        self.__layers = layers
        self.__detach = detach
        self.__device = device
        self._extractor = FeatureExtractorHandle()
        self._encoder.to(self.__device)
        for layer in self.__layers:
            getattr(self._encoder, layer).register_forward_hook(self._extractor)  # leak

    def __call__(self, x) -> dict:
        return self.run(x)

    def run(self, x) -> dict:
        self._extractor.clear()
        xt = x if isinstance(x, torch.Tensor) else torch.tensor(x[np.newaxis], device=self.__device)
        self._encoder.forward(xt)
        features = {layer: self._extractor.outputs[i] for i, layer in enumerate(self.__layers)}
        if self.__detach:
            features = {k: v.cpu().detach().numpy() for k, v in features.items()}
        return features


def reconstruct(features, encoder, layers, n_iter=200, device="cuda:0"):
    feature_extractor = FeatureExtractor(encoder, layers, device=device, detach=False)
    x = torch.zeros(1, 3, 224, 224, device=device, requires_grad=True)
    optimizer = torch.optim.Adam([x], lr=0.1)
    for it in range(n_iter):
        optimizer.zero_grad()
        fxt = feature_extractor.run(x)
        loss = sum(((fxt[layer] - torch.tensor(features[layer], device=device)) ** 2).sum() for layer in layers)
        loss.backward()
        optimizer.step()
    return x.detach().cpu().numpy()


def reconstruct_all(encoder, layers, all_features):
    return [reconstruct(features, encoder, layers) for features in all_features]
