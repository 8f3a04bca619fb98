import torch
import torch.nn as nn


class Runner:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.score = self.compute_score  # expect: GL207

    def compute_score(self, x):
        return self.model(x).mean()


for fold in range(5):
    runner = Runner(nn.Linear(10, 10).cuda())
