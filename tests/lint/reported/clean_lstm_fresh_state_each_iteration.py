# Source: https://github.com/pytorch/pytorch/issues/1478
# Reported: "GPU Memory climbs with torch.nn.LSTM or torch.nn.LSTMCell ... memory jumps up on every
#   forward pass" (the growth came from the library of that time; the loop itself keeps nothing).
# Label: clean. h0/c0 are created anew every iteration and the outputs are rebound.
import torch
import torch.nn as nn
from torch.autograd import Variable


def datagen(batch_size, seq_length, vector_dim):
    return torch.rand(seq_length, batch_size, vector_dim)


samples = 100000
batch_size = 32
sequence_len = 20
vector_dim = 10

lstm = nn.LSTM(vector_dim, vector_dim).cuda()

for sample in range(samples):
    input = Variable(datagen(batch_size, sequence_len, vector_dim).cuda(), requires_grad=True)
    # Instantiating new c0 and h0 on every forward...I hope
    c0 = Variable(torch.rand(lstm.num_layers, batch_size, lstm.hidden_size).cuda(), requires_grad=False)
    h0 = Variable(torch.rand(lstm.num_layers, batch_size, lstm.hidden_size).cuda(), requires_grad=False)
    hidden, output = lstm(input, (h0, c0))
