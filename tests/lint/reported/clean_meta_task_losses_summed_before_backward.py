# Source: https://github.com/myungsub/meta-interpolation/issues/4 (meta_learning_system.py)
# Reported: "I am wondering if line 431 in meta_learning_system.py would result in GPU memory leak?
#   Essentially you are appending task-wise meta loss, which may result in keep generating the
#   graphs."
# Label: clean. The list is local to one outer step: the task losses are stacked into the loss
#   that meta_update() differentiates, and the list dies when forward() returns.
import torch
import torch.nn as nn


class MAMLFewShotSystem(nn.Module):
    def __init__(self, net, criterion, args):
        super().__init__()
        self.net = net
        self.criterion = criterion
        self.args = args
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=args.meta_learning_rate)

    def forward(self, frames, num_steps):
        total_losses = []
        for task_id in range(len(frames[0])):
            task_losses = []
            weights = dict(self.net.named_parameters())
            for num_step in range(num_steps):
                support_loss = 0
                for ind in [[0, 2, 4], [2, 4, 6]]:
                    out = self.net(frames[ind[0]][task_id].unsqueeze(0), frames[ind[2]][task_id].unsqueeze(0), params=weights)
                    support_loss = support_loss + self.criterion(out, frames[ind[1]][task_id].unsqueeze(0))
                weights = self.apply_inner_loop_update(support_loss, weights, num_step)
                target_preds = self.net(frames[2][task_id].unsqueeze(0), frames[4][task_id].unsqueeze(0), params=weights)
                task_losses.append(self.criterion(target_preds, frames[3][task_id].unsqueeze(0)))
            task_losses = torch.sum(torch.stack(task_losses))
            total_losses.append(task_losses)
        return {"loss": torch.mean(torch.stack(total_losses))}

    def meta_update(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run_train_iter(self, data_batch, epoch):
        if not self.training:
            self.train()
        data_batch = [frame.to(device=self.device) for frame in data_batch]
        losses = self.forward(data_batch, self.args.number_of_training_steps_per_iter)
        self.meta_update(loss=losses["loss"])
        return losses
