# Source: https://github.com/microsoft/Biodiversity/pull/662 ("fix: wrap classifier batch
#   inference in torch.no_grad() to stop memory leak", fixes issue #609); file
#   PytorchWildlife/models/classification/resnet_base/base_classifier.py before the fix, as
#   stored at microsoft/CameraTraps commit 3b3b3db26e4540e70b100a57c4e3b926f927232a (the
#   project's earlier name; excerpt: PlainResNetInference.forward and batch_image_classification)
# Reported: "batch_image_classification() ... ran the forward pass without torch.no_grad() ...
#   PyTorch retained the autograd graph for every batch appended to total_logits, so memory grew
#   unbounded over a run instead of staying flat. ... reported ~300GB RAM/VRAM growth and a crash
#   before completing inference on ~3000 images."
# Pattern: the inference loop calls the module's own forward (a ResNet on self.device) on every
#   batch with gradients enabled and appends the logits, still on the GPU and carrying their
#   graphs, to total_logits until the torch.cat after the loop.
# Label: lines marked `# leak` keep the memory
import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from ..base_classifier import BaseClassifierInference
from ....data import datasets as pw_data


class PlainResNetInference(BaseClassifierInference):
    def forward(self, img):
        feats = self.net.feature(img)
        logits = self.net.classifier(feats)
        return logits

    def batch_image_classification(self, data_path=None, det_results=None, id_strip=None):
        """
        Process a batch of images for classification.
        """

        if data_path:
            dataset = pw_data.ImageFolder(
                data_path,
                transform=self.transform,
                path_head='.'
            )
        elif det_results:
            dataset = pw_data.DetectionCrops(
                det_results,
                transform=self.transform,
                path_head='.'
            )
        else:
            raise Exception("Need data for inference.")

        dataloader = DataLoader(dataset, batch_size=32, shuffle=False,
                                pin_memory=True, num_workers=4, drop_last=False)
        total_logits = []
        total_paths = []

        with tqdm(total=len(dataloader)) as pbar:
            for batch in dataloader:
                imgs, paths = batch
                imgs = imgs.to(self.device)
                total_logits.append(self.forward(imgs))  # leak
                total_paths.append(paths)
                pbar.update(1)

        total_logits = torch.cat(total_logits, dim=0).cpu()
        total_paths = np.concatenate(total_paths, axis=0)

        return self.results_generation(total_logits, total_paths, id_strip=id_strip)
