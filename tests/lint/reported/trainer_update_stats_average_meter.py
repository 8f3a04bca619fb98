# Source: https://github.com/visionml/pytracking/pull/313
# Reported: "The method _update_stats() is called with val, which is a Tensor with gradients. When
#   used with AverageMeter, the gradient graph will be accumulated during training and won't be
#   released".
# Pattern: per-batch stats dict (tensors from the actor's forward) fed into meters kept on self.
# Label: the lines marked `# leak` keep the memory.
from collections import OrderedDict

import torch


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n  # leak
        self.count += n
        self.avg = self.sum / self.count


class LTRTrainer:
    def __init__(self, actor, loaders, optimizer):
        self.actor = actor
        self.loaders = loaders
        self.optimizer = optimizer
        self.stats = OrderedDict({loader.name: None for loader in self.loaders})

    def cycle_dataset(self, loader):
        self.actor.train(loader.training)
        torch.set_grad_enabled(loader.training)
        for i, data in enumerate(loader, 1):
            data = data.to(self.device)
            loss, stats = self.actor(data)
            if loader.training:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            self._update_stats(stats, loader.batch_size, loader)

    def _update_stats(self, new_stats: OrderedDict, batch_size, loader):
        if loader.name not in self.stats.keys() or self.stats[loader.name] is None:
            self.stats[loader.name] = OrderedDict({name: AverageMeter() for name in new_stats.keys()})
        for name, val in new_stats.items():
            if name not in self.stats[loader.name].keys():
                self.stats[loader.name][name] = AverageMeter()
            self.stats[loader.name][name].update(val, batch_size)  # leak
