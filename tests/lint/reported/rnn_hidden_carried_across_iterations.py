# Source: https://github.com/pytorch/pytorch/issues/2198
# Reported: "Memory leak problem in LSTM and RNN" - answer: "out and hidden will hold the whole
#   history. plz detach your results of RNN at a shorter length. Memory is exhausted by storing the
#   backward information of this sequence of length 10000."
# Pattern: the RNN's hidden state is fed back every iteration without detach().
# Label: the line marked `# leak` keeps the memory.
import torch
import torch.nn as nn
from torch.autograd import Variable

input_size = 128
hidden_size = 256
rnn = nn.RNNCell(input_size, hidden_size).cuda()
hidden = Variable(torch.zeros(16, hidden_size).cuda())

for i in range(10000):
    data = Variable(torch.rand(16, input_size).cuda())
    hidden = rnn(data, hidden)  # leak
    if i % 1000 == 0:
        print(i, torch.cuda.memory_allocated())
