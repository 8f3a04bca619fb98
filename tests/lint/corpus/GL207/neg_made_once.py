import torch


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters())
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: self.warmup(s))

    def warmup(self, step):
        return min(1.0, step / 1000)


trainer = Trainer(torch.nn.Linear(10, 10).cuda())
for epoch in range(10):
    trainer.sched.step()
