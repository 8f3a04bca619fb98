# Source: https://github.com/microsoft/Biodiversity/pull/662 ("fix: wrap classifier batch
#   inference in torch.no_grad() to stop memory leak", fixes issue #609); file
#   PytorchWildlife/models/classification/resnet_base/base_classifier.py with the fix, as stored
#   at microsoft/Biodiversity commit e9b79fbbcefc800ed7ad710a02b5f774c7ce4e2f (excerpt:
#   PlainResNetInference.forward and batch_image_classification)
# Reported: "Since gradients were tracked, PyTorch retained the autograd graph for every batch
#   appended to total_logits ... Also moved each batch's logits to CPU right after inference
#   (.cpu() per batch) instead of holding them all on GPU until the final torch.cat(...).cpu()"
# Pattern: the same loop and list, but the loop runs under torch.no_grad() and each batch's
#   logits are copied to the CPU before they are appended: total_logits holds graph-free CPU
#   tensors, and no GPU memory is kept from one batch to the next.
# Label: control: nothing here keeps GPU memory across steps
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
            dataset = pw_data.ClassificationImageFolder(
                data_path,
                transform=self.transform,
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

        with torch.no_grad(), tqdm(total=len(dataloader)) as pbar:
            for batch in dataloader:
                imgs, paths = batch
                imgs = imgs.to(self.device)
                total_logits.append(self.forward(imgs).cpu())
                total_paths.append(paths)
                pbar.update(1)

        total_logits = torch.cat(total_logits, dim=0)
        total_paths = np.concatenate(total_paths, axis=0)

        return self.results_generation(total_logits, total_paths, id_strip=id_strip)
