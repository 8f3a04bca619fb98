# A helper cached with functools.cache takes the model: every fold's model stays.
import functools

import torch
from torch import nn


@functools.cache  # expect: GL205
def trainable_parameters(model: nn.Module):
    return [p for p in model.parameters() if p.requires_grad]


def cross_validate(make_model, folds, fit):
    for fold in folds:
        model = make_model().to("cuda")
        fit(model, trainable_parameters(model), fold)
