# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/models/inkling/modeling_inkling.py (the vision encoder's
# __init__), shortened. Clean: the layers are modules built once.
import torch
from torch import nn


class InklingVisionEncoderLayer(nn.Module):
    def __init__(self, input_dim, device=None):
        super().__init__()
        self.proj = nn.Linear(input_dim, input_dim, device=device)


class InklingVisionEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.encoder_layers = nn.ModuleList()
        for _ in range(config.num_hidden_layers):
            self.encoder_layers.append(
                InklingVisionEncoderLayer(input_dim=config.hidden_size, device=torch.device("cuda"))
            )
