# Source: https://github.com/pytorch/pytorch/issues/51883 (closed, no fix in the reporter's code), the reproduction of the report
# Reported: "I have detected a memory leak when using a lambda function inside a Python class." The allocated memory grows by 1144 MiB per iteration and falls back only now and then.
# Pattern: Class1.__init__ keeps the GPU tensor it is given (self.x0) and a lambda that uses `self` (self._leak_fcn): a reference cycle, so each Class1 made by fcn() in the loop keeps its 1.1 GiB tensor until the cycle collector runs.
# Label: lines marked `# leak` keep the memory
import torch

class Class1(object):
    def __init__(self, x0):
        self.x0 = x0
        self.obj2 = Class2()
        self._leak_fcn = lambda: self.obj2.fcn()  # leak

class Class2(object):
    def fcn(self):
        pass

def fcn(x0):
    obj1 = Class1(x0)
    return x0

def test_fcn():
    shape = (50000000, 3)
    y0 = torch.randn(shape).to(torch.double).to(torch.device("cuda"))
    y = fcn(y0)
    return y

for i in range(100):
    test_fcn()
    torch.cuda.empty_cache()
    print("memory allocated: %f MiB" % float(torch.cuda.memory_allocated() / 1024 ** 2))
