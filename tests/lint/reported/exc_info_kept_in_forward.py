# Source: https://github.com/pytorch/pytorch/issues/1318
# Reported: "The problem (very strangely) is the line: t, v, b = sys.exc_info() (go figure)."
#   The traceback in a local of the function that handles the exception makes the reference
#   cycle Python's sys.exc_info() documentation warns about: frame -> traceback -> frame, so the
#   step's tensors wait for the cycle collector.
# Pattern: sys.exc_info() kept in locals of forward(), called every iteration.
# Label: the line marked `# leak` keeps the memory.
import sys

import torch
import torch.autograd as autograd
import torch.nn as nn


class RnnLm(nn.Module):
    def __init__(self):
        super(RnnLm, self).__init__()
        self.embedding = nn.Embedding(num_embeddings=10000, embedding_dim=200)

    def forward(self, inputs):
        try:
            self.foobar
        except AttributeError:
            t, v, b = sys.exc_info()  # leak
        emb_inputs = self.embedding(inputs)
        return emb_inputs.view(1280, 200)


model = RnnLm()
model.cuda()

for i in range(1000):
    x = torch.LongTensor(64, 20).fill_(1).cuda()
    x = autograd.Variable(x)
    y_hat = model(x)
    y_hat.backward(y_hat.data.new(*y_hat.data.size()))
