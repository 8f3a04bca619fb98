# Shape of pytorch/examples@77f55b912142e11fcfdf5b530231fb9c52f181e8:distributed/rpc/ddp_rpc/main.py
# (_run_trainer), shortened. Clean: each iteration opens its own distributed autograd
# context, which holds that iteration's gradients; DistributedOptimizer.step(context_id)
# applies them and the context is gone at the end of the `with` block, so there is
# nothing to zero (the example says so in a comment).
import torch
import torch.distributed.autograd as dist_autograd
from torch.distributed.optim import DistributedOptimizer


def _run_trainer(model, remote_params, get_next_batch, rank):
    criterion = torch.nn.CrossEntropyLoss()
    opt = DistributedOptimizer(torch.optim.SGD, remote_params, lr=0.05)
    for epoch in range(100):
        for indices, offsets, target in get_next_batch(rank):
            with dist_autograd.context() as context_id:
                output = model(indices, offsets)
                loss = criterion(output, target)
                dist_autograd.backward(context_id, [loss])
                opt.step(context_id)
        print("Training done for epoch {}".format(epoch))
