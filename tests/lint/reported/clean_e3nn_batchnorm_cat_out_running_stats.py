# Source: https://github.com/e3nn/e3nn/issues/414 (e3nn/nn/_batchnorm.py at bb71b3c)
# Reported: "a potential memory leak in the BatchNorm implementation ... the running mean /
#   variance will grow endlessly large as we keep training because a new tensor is concatenated
#   every batch"; maintainer: "torch.cat does not append to out" (closed, no change).
# Label: clean. torch.cat(..., out=buffer) writes into the fixed-size buffer, and the rolling
#   average detaches the batch statistic, so the buffers neither grow nor hold a graph.
import torch
from torch import nn


class BatchNorm(nn.Module):
    def __init__(self, irs, num_scalar, num_features, momentum=0.1, eps=1e-5):
        super().__init__()
        self.irs = irs  # [(mul, dim, is_scalar), ...]
        self.momentum = momentum
        self.eps = eps
        self.register_buffer("running_mean", torch.zeros(num_scalar))
        self.register_buffer("running_var", torch.ones(num_features))
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_scalar))

    def _roll_avg(self, curr, update):
        return (1 - self.momentum) * curr + self.momentum * update.detach()

    def forward(self, input):
        orig_shape = input.shape
        batch = input.shape[0]
        dim = input.shape[-1]
        input = input.reshape(batch, -1, dim)

        if self.training:
            new_means = []
            new_vars = []

        fields = []
        ix = irm = irv = iw = ib = 0
        for mul, d, is_scalar in self.irs:
            field = input[:, :, ix : ix + mul * d].reshape(batch, -1, mul, d)
            ix += mul * d
            if is_scalar:
                if self.training:
                    field_mean = field.mean([0, 1]).reshape(mul)
                    new_means.append(self._roll_avg(self.running_mean[irm : irm + mul], field_mean))
                else:
                    field_mean = self.running_mean[irm : irm + mul]
                irm += mul
                field = field - field_mean.reshape(-1, 1, mul, 1)

            if self.training:
                field_norm = field.pow(2).mean(3).mean(1).mean(0)
                new_vars.append(self._roll_avg(self.running_var[irv : irv + mul], field_norm))
            else:
                field_norm = self.running_var[irv : irv + mul]
            irv += mul

            field_norm = (field_norm + self.eps).pow(-0.5) * self.weight[iw : iw + mul]
            iw += mul
            field = field * field_norm.reshape(-1, 1, mul, 1)
            if is_scalar:
                field = field + self.bias[ib : ib + mul].reshape(mul, 1)
                ib += mul
            fields.append(field.reshape(batch, -1, mul * d))

        if self.training:
            if len(new_means) > 0:
                torch.cat(new_means, out=self.running_mean)
            if len(new_vars) > 0:
                torch.cat(new_vars, out=self.running_var)

        output = torch.cat(fields, dim=2)
        return output.reshape(orig_shape)
