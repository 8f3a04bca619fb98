# Source: https://github.com/jokester-zzz/SSA-SC/issues/2
# Reported: "The way of updating training and validation loss results in the continuous rising of
#   gpu memory, such as loss[key] ... it should be loss[key].item()".
# Pattern: per-epoch dict of running losses summed from the loss tensors of each batch.
# Label: the line marked `# leak` keeps the memory.
import torch


def train(model, optimizer, scheduler, dataset, _cfg, start_epoch, logger, tbwriter):
    dset = dataset["train"]
    nbr_epochs = _cfg._dict["TRAIN"]["EPOCHS"]
    dtype = torch.float32
    device = torch.device("cuda")
    for epoch in range(start_epoch, nbr_epochs + 1):
        model.train()
        epoch_loss = {}
        for t, (data, indices) in enumerate(dset):
            for key in data:
                data[key] = data[key].to(device=device, dtype=dtype)
            scores = model(data)
            loss = model.compute_loss(scores, data)
            optimizer.zero_grad()
            loss["total"].backward()
            optimizer.step()
            for key in loss:
                if key not in epoch_loss:
                    epoch_loss[key] = 0
                epoch_loss[key] += loss[key]  # leak
        for key in epoch_loss:
            tbwriter.add_scalar("train_loss_epoch/{}".format(key), epoch_loss[key] / len(dset), epoch)
        scheduler.step()
