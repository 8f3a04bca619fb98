"""Gradients of the embedding output collected by a tensor hook.

Reported: https://github.com/pytorch/pytorch/issues/4661 (a hook at the
embedding layer captures the gradients, "embedding_gradient = []", and GPU
memory grows). The shape here: every step registers a tensor hook on the
embedding output that appends the incoming gradient to the module-level list
`embedding_gradients`, for a saliency map computed at the end. The gradient
is made by autograd's engine thread during `loss.backward()`, where no Python
frame is running: 64 x 128 x 256 float32 = 8 MiB per step.

Holder: the list `embedding_gradients` (module __main__), filled by the hook.
Fix: keep `grad.detach().norm(dim=-1).cpu()` (what the saliency map needs),
or clear the list every step.
"""
import torch
from torch import nn

from case_options import parse_args

BATCH, TOKENS, VOCAB, WIDTH = 64, 128, 1000, 256
embedding_gradients = []


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.encoder = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.head = nn.Linear(WIDTH, 2)

    def forward(self, tokens):
        embedded = self.embed(tokens)
        embedded.register_hook(lambda grad: embedding_gradients.append(grad))  # KEPT: hook-registration
        return self.head(self.encoder(embedded).mean(1))


def train(steps, device):
    torch.manual_seed(0)
    model = Classifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        tokens = torch.randint(0, VOCAB, (BATCH, TOKENS), device=device)
        labels = torch.randint(0, 2, (BATCH,), device=device)
        loss = nn.functional.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
