import torch


def serve(model, queue):
    seen = []
    while True:
        x = queue.get().cuda()
        with torch.no_grad():
            y = model(x)
        seen.append(y)  # expect: GL201
        queue.reply(y.cpu())
