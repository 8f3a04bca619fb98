# Source: https://github.com/pytorch/pytorch/issues/17630 ("Memory leak in ReduceLROnPlateau ?"),
#   the reproducer of the issue with the scheduler line it gives as the one that does not leak
#   (wrapped in a function for the arguments it reads)
# Reported: "The GPU memory keep increasing when calling torch.optim.lr_scheduler.ReduceLROnPlateau
#   multiple times. Using torch.optim.lr_scheduler.StepLR does not have such issue."
# Pattern: the same `while True:` loop building a GPU network, an Adam optimizer and a scheduler
#   each iteration, with StepLR, which holds no reference back to itself: when the names are
#   rebound the previous network, optimizer and scheduler are freed at once.
# Label: control: nothing here keeps GPU memory across iterations
import torch


def main(args):
    while True:
        net = torch.nn.Linear(5000, 5000)
        net = net.cuda()
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        # scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer,
        #         'max', patience=args.patience, factor=0.5, verbose=True)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
