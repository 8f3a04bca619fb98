# Source: https://github.com/shenweichen/DeepCTR-Torch/issues/208 ("Break Computational Graph"),
#   file deepctr_torch/models/basemodel.py (BaseModel.fit, excerpt: the epoch and step loops)
# Reported: "while computing metric for after each batch, below approach ... leads to
#   constructing autograd edge on cpu: y.cpu().data.numpy(), y_pred.cpu().data.numpy() ...
#   breaking computational graph before these ... will enable the code run faster"
# Pattern: look-alike, no leak. `y_pred.cpu()` is taken of a tensor with grad_fn, but `.data`
#   and `.numpy()` follow at once and only the metric's float is appended to train_result[name];
#   that dict of lists is rebuilt every epoch. The loss sums take `.item()`. The report is about
#   speed (a copy recorded in the graph for one step), not memory kept across steps.
# Label: control: nothing here keeps GPU memory across steps
import time

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


class BaseModel(torch.nn.Module):
    def fit(self, train_tensor_data, batch_size=256, epochs=1, verbose=1, initial_epoch=0, shuffle=True):
        model = self.train()
        loss_func = self.loss_func
        optim = self.optim
        train_loader = DataLoader(dataset=train_tensor_data, shuffle=shuffle, batch_size=batch_size)
        sample_num = len(train_tensor_data)
        steps_per_epoch = (sample_num - 1) // batch_size + 1

        for epoch in range(initial_epoch, epochs):
            epoch_logs = {}
            start_time = time.time()
            loss_epoch = 0
            total_loss_epoch = 0
            train_result = {}
            with tqdm(enumerate(train_loader), disable=verbose != 1) as t:
                for _, (x_train, y_train) in t:
                    x = x_train.to(self.device).float()
                    y = y_train.to(self.device).float()

                    y_pred = model(x).squeeze()

                    optim.zero_grad()
                    loss = loss_func(y_pred, y.squeeze(), reduction='sum')
                    reg_loss = self.get_regularization_loss()

                    total_loss = loss + reg_loss + self.aux_loss

                    loss_epoch += loss.item()
                    total_loss_epoch += total_loss.item()
                    total_loss.backward()
                    optim.step()

                    if verbose > 0:
                        for name, metric_fun in self.metrics.items():
                            if name not in train_result:
                                train_result[name] = []
                            train_result[name].append(metric_fun(
                                y.cpu().data.numpy(), y_pred.cpu().data.numpy().astype("float64")))

            epoch_logs["loss"] = total_loss_epoch / sample_num
            for name, result in train_result.items():
                epoch_logs[name] = np.sum(result) / steps_per_epoch
            if verbose > 0:
                epoch_time = int(time.time() - start_time)
                print('Epoch {0}/{1}'.format(epoch + 1, epochs))
                print("{0}s - loss: {1: .4f}".format(epoch_time, epoch_logs["loss"]))
        return self.history
