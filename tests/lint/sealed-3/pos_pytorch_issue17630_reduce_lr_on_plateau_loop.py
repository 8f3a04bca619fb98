# Source: https://github.com/pytorch/pytorch/issues/17630 ("Memory leak in ReduceLROnPlateau ?"),
#   the reproducer of the issue (wrapped in a function for the arguments it reads)
# Reported: "The GPU memory keep increasing when calling torch.optim.lr_scheduler.ReduceLROnPlateau
#   multiple times. Using torch.optim.lr_scheduler.StepLR does not have such issue. ... GPU memory
#   keeps increasing until out of memory"
# Pattern: `while True:` builds a 5000x5000 Linear on the GPU, an Adam optimizer over it and a
#   ReduceLROnPlateau scheduler. That scheduler kept a bound method of itself (its comparison
#   function) as an attribute, a reference cycle; the scheduler holds the optimizer, the
#   optimizer the parameters, so each iteration's network stays on the GPU after the names are
#   rebound, until the cycle collector runs.
# Label: lines marked `# leak` keep the memory
import torch


def main(args):
    while True:
        net = torch.nn.Linear(5000, 5000)
        net = net.cuda()
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(  # leak
            optimizer, 'max', patience=args.patience, factor=0.5, verbose=True)
        # scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30,
        #         gamma=0.1)
