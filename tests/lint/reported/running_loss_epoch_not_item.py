# Source: https://github.com/BatsResearch/labelmodels/issues/4 (labelmodels/label_model.py#L90)
# Reported: "You're holding on to the graph for each batch per epoch, since running_loss is the sum
#   of non-detached tensors. For a large enough training set my GPU runs out of memory."
# Pattern: a per-epoch running loss summed from graph-carrying loss tensors.
# Label: the line marked `# leak` keeps the memory.
import logging

import torch
import torch.nn as nn


class LabelModel(nn.Module):
    def _do_estimate_label_model(self, batches, config):
        optimizer = torch.optim.SGD(self.parameters(), lr=config.step_size, momentum=config.momentum)
        for epoch in range(config.epochs):
            logging.info("Epoch {}/{}".format(epoch + 1, config.epochs))
            self.train()
            running_loss = 0.0
            for i_batch, inputs in enumerate(batches):
                optimizer.zero_grad()
                log_likelihood = self(*inputs)
                loss = -1 * torch.mean(log_likelihood)
                loss += self._get_regularization_loss()
                loss.backward()
                optimizer.step()
                running_loss += loss  # leak
            epoch_loss = running_loss / len(batches)
            logging.info("Train Loss: %.6f", epoch_loss)
