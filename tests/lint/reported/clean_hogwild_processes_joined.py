# Source: https://github.com/pytorch/examples/blob/main/mnist_hogwild/main.py
# Label: clean. Worker processes are started in a loop and every one of them is joined.
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x):
        return F.log_softmax(self.fc(x.view(-1, 784)), dim=1)


def train(rank, args, model, device, dataset, dataloader_kwargs):
    torch.manual_seed(args.seed + rank)
    train_loader = torch.utils.data.DataLoader(dataset, **dataloader_kwargs)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data.to(device)), target.to(device))
            loss.backward()
            optimizer.step()


def main(args, dataset1):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataloader_kwargs = {"batch_size": args.batch_size, "shuffle": True}
    mp.set_start_method("spawn", force=True)
    model = Net().to(device)
    model.share_memory()
    processes = []
    for rank in range(args.num_processes):
        p = mp.Process(target=train, args=(rank, args, model, device, dataset1, dataloader_kwargs))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
