# Source: https://github.com/eriklindernoren/PyTorch-GAN/issues/71 ("CycleGAN: Using detach() on
#   fake"), files implementations/cyclegan/utils.py (ReplayBuffer) and
#   implementations/cyclegan/cyclegan.py (training loop, reduced to generator B->A and
#   discriminator A; excerpt)
# Reported: "Shouldn't detach() moved from to the fake we use as input to the buffer? ...
#   fake_A_ = fake_A_buffer.push_and_pop(fake_A.detach()) ... This will help us save some memory;
#   as it is just a buffer and the graph should not be retained in the buffer."
# Pattern: the generator output fake_A (with its graph) is handed to the buffer every step, but
#   push_and_pop iterates over `data.data`, so what it keeps in self.data are graph-free views of
#   the images, and the list never holds more than max_size (50) of them: one new element
#   replaces an old one once it is full. The suggested change does not change what is kept.
# Label: control: nothing here keeps GPU memory across steps
import random

import torch
from torch.autograd import Variable


class ReplayBuffer:
    def __init__(self, max_size=50):
        assert max_size > 0, "Empty buffer or trying to create a black hole. Be careful."
        self.max_size = max_size
        self.data = []

    def push_and_pop(self, data):
        to_return = []
        for element in data.data:
            element = torch.unsqueeze(element, 0)
            if len(self.data) < self.max_size:
                self.data.append(element)
                to_return.append(element)
            else:
                if random.uniform(0, 1) > 0.5:
                    i = random.randint(0, self.max_size - 1)
                    to_return.append(self.data[i].clone())
                    self.data[i] = element
                else:
                    to_return.append(element)
        return Variable(torch.cat(to_return))


def train(opt, dataloader, G_AB, G_BA, D_A, criterion_GAN, optimizer_G, optimizer_D_A, Tensor):
    fake_A_buffer = ReplayBuffer()
    for epoch in range(opt.epoch, opt.n_epochs):
        for i, batch in enumerate(dataloader):
            real_A = Variable(batch["A"].type(Tensor))
            real_B = Variable(batch["B"].type(Tensor))
            valid = Variable(Tensor(torch.ones((real_A.size(0), *D_A.output_shape))), requires_grad=False)
            fake = Variable(Tensor(torch.zeros((real_A.size(0), *D_A.output_shape))), requires_grad=False)

            # Train generators
            G_AB.train()
            G_BA.train()
            optimizer_G.zero_grad()
            fake_A = G_BA(real_B)
            loss_GAN_BA = criterion_GAN(D_A(fake_A), valid)
            loss_G = loss_GAN_BA
            loss_G.backward()
            optimizer_G.step()

            # Train Discriminator A
            optimizer_D_A.zero_grad()
            loss_real = criterion_GAN(D_A(real_A), valid)
            fake_A_ = fake_A_buffer.push_and_pop(fake_A)
            loss_fake = criterion_GAN(D_A(fake_A_.detach()), fake)
            loss_D_A = (loss_real + loss_fake) / 2
            loss_D_A.backward()
            optimizer_D_A.step()
