# Source: https://github.com/lyq133/LIC-HPCM/issues/4
# Reported: "Memory Leak in AverageMeter Prevents Per-Step VRAM Release ... loss.update(out_criterion
#   ['loss']) is called. The out_criterion['loss'] is a torch.Tensor that holds the entire
#   computation graph for that step" (crash at step 14400/20718).
# Pattern: a metrics class whose update() sums tensors that still carry their graph.
# Label: the lines marked `# leak` keep the memory (the sum inside update, fed by the calls).
import time

import torch


class AverageMeter:
    """Compute running average."""

    def __init__(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n  # leak
        self.count += n
        self.avg = self.sum / self.count


def train_one_epoch(model, criterion, train_dataloader, optimizer, epoch, clip_max_norm):
    model.train()
    device = next(model.parameters()).device
    loss = AverageMeter()
    bpp_loss = AverageMeter()
    mse_loss = AverageMeter()

    t_start = time.time()
    for i, d in enumerate(train_dataloader):
        d = d.to(device)
        optimizer.zero_grad()
        out_net = model(d)
        out_criterion = criterion(out_net, d)
        out_criterion["loss"].backward()
        if clip_max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_max_norm)
        optimizer.step()

        bpp_loss.update(out_criterion["bpp_loss"])  # leak
        loss.update(out_criterion["loss"])  # leak
        mse_loss.update(out_criterion["mse_loss"])  # leak

        if i % 100 == 0:
            print(f"Train epoch {epoch}: Loss: {loss.avg:.4f} | MSE loss: {mse_loss.avg:.6f}")
            torch.cuda.empty_cache()
