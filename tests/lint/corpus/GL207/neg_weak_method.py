import weakref

import torch


class Runner:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.score = weakref.WeakMethod(self.compute_score)

    def compute_score(self, x):
        return self.model(x).mean()


for fold in range(5):
    runner = Runner(torch.nn.Linear(10, 10).cuda())
