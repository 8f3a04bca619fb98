import torch


def objective(trial_lr, data, target):
    experiment = Experiment(trial_lr)
    return experiment.fit(data, target)


class Experiment:
    def __init__(self, lr):
        self.lr = lr
        self.net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU()).cuda()
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=lr)
        self.sched = torch.optim.lr_scheduler.LambdaLR(  # expect: GL207
            self.opt, lambda step: min(1.0, step / self.warmup_steps())
        )

    def warmup_steps(self):
        return 100

    def fit(self, data, target):
        loss = torch.nn.functional.mse_loss(self.net(data), target)
        loss.backward()
        self.opt.step()
        self.sched.step()
        return loss.item()


for lr in [1e-2, 1e-3, 1e-4]:
    score = objective(lr, data, target)
