# Source: https://github.com/pytorch/pytorch/issues/47589 (closed, no fix in the reporter's code), the reproduction of the report
# Reported: "When `torch.optim.lr_scheduler.LambdaLR` is used in a specific way (where the optimizer and the scheduler are both attached to an object instance and the lambda function refers to an instance variable), a GPU memory leak is observed. ... A gradual increase in peak memory usage is observed in the main GPU device. This will cause OOM error eventually."
# Pattern: __init__ keeps a LambdaLR whose lr_lambda closes over `self`; the object holds the scheduler, the scheduler the lambda, the lambda the object: a reference cycle, so each Foo made in the `while True:` loop keeps its optimizer and its GPU state until the cycle collector runs.
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
