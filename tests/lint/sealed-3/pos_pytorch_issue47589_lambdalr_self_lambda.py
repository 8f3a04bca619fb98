# Source: https://github.com/pytorch/pytorch/issues/47589 ("LambdaLR + class binding causes GPU
#   memory leakage"), the reproducer of the issue
# Reported: "When torch.optim.lr_scheduler.LambdaLR is used in a specific way (where the optimizer
#   and the scheduler are both attached to an object instance and the lambda function refers to
#   an instance variable), a GPU memory leak is observed. ... A gradual increase in peak memory
#   usage is observed in the main GPU device. This will cause OOM error eventually."
# Pattern: in `while True: Foo().run()`, each Foo makes an Adam optimizer (whose state holds GPU
#   moment tensors after the first step) and a LambdaLR whose lr_lambda is a lambda over `self`;
#   the scheduler, kept in self.sc, holds the lambda, which holds the Foo: a reference cycle, so
#   every iteration's optimizer state outlives the iteration until the cycle collector runs.
# Label: lines marked `# leak` keep the memory
import torch


weight = torch.nn.Linear(100, 100).to("cuda")


class Foo:
    def __init__(self):
        self.lr = 1.0
        self.op = torch.optim.Adam(weight.parameters())
        self.sc = torch.optim.lr_scheduler.LambdaLR(self.op, lr_lambda=lambda s: self.lr)  # leak

    def run(self):
        loss = weight(torch.randn(32, 100).to("cuda")).mean()
        self.op.zero_grad()
        loss.backward()
        self.sc.step()
        self.op.step()


while True:
    Foo().run()
