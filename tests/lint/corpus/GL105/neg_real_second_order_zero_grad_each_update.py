# Shape of huggingface/pytorch-image-models@aa4b5850c1543fa488abf260f18390eda46cf85d:train.py
# (train_one_epoch), shortened. Clean: `backward(create_graph=second_order)` for optimizers
# that need second-order information, and `optimizer.zero_grad()` after every update, which
# resets each parameter's `.grad` and so breaks the parameter -> .grad -> graph cycle; only
# parameters are leaves (no input requires grad), so nothing is left behind from one update
# to the next.
import time

import torch


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, device=torch.device("cuda")):
    second_order = hasattr(optimizer, "is_second_order") and optimizer.is_second_order
    accum_steps = args.grad_accum_steps
    model.train()
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        need_update = (batch_idx + 1) % accum_steps == 0
        input, target = input.to(device), target.to(device)

        def _forward():
            output = model(input)
            _loss = loss_fn(output, target)
            if accum_steps > 1:
                _loss /= accum_steps
            return _loss

        def _backward(_loss):
            _loss.backward(create_graph=second_order)
            if need_update:
                if args.clip_grad is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
                optimizer.step()

        loss = _forward()
        _backward(loss)
        if not need_update:
            continue
        optimizer.zero_grad()
        print(epoch, batch_idx, loss.item(), time.time())
