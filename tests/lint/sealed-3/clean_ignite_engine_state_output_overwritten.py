# Source: https://github.com/pytorch/ignite/pull/476 ("Remove extra memory usage in batch
#   processing."), the reproducer posted in the pull request by the maintainer
# Reported: the engine keeps the previous iteration's output in engine.state.output while the
#   next update runs, so GPU memory inside update_fn is twice one batch's outputs (208 MB between
#   iterations, 416 MB inside), "extra memory usage", not growth; a handler that sets
#   engine.state.output = None at ITERATION_STARTED removes the overhead.
# Pattern: look-alike, no growth: update_fn returns two CUDA tensors that the engine stores in
#   an attribute of its long-lived state object, but each iteration replaces (here: first clears)
#   that attribute, so at most one batch's outputs are held. The list the handlers append to,
#   engine.state.cuda_mem_consumption, grows by Python ints from torch.cuda.memory_allocated().
# Label: control: nothing here keeps GPU memory across steps
import torch
from ignite.engine import Engine, Events

data = [0, 1, 2]


def update_fn(engine, batch):

    y_pred = torch.rand(16, 50, 256, 256).to('cuda')
    y = torch.randint(0, 50, size=(16, 256, 256)).to('cuda')
    cuda_mem = torch.cuda.memory_allocated()
    print("inside update_fn: GPU mem {} MB".format(cuda_mem / 1024 / 1024))
    engine.state.cuda_mem_consumption.append(cuda_mem)
    return y_pred, y


engine = Engine(update_fn)


@engine.on(Events.STARTED)
def initialize(engine):
    engine.state.cuda_mem_consumption = []
    torch.cuda.empty_cache()


@engine.on(Events.ITERATION_STARTED)
def log_cuda_mem(engine):
    cuda_mem = torch.cuda.memory_allocated()
    print("outside update_fn: GPU mem {} MB".format(cuda_mem / 1024 / 1024))
    engine.state.cuda_mem_consumption.append(cuda_mem)


@engine.on(Events.ITERATION_STARTED)
def clear_state_output(engine):
    engine.state.output = None


state = engine.run(data, max_epochs=2)

print(state.cuda_mem_consumption)
