# Source: https://github.com/seungeunrho/minimalRL/issues/3 (dqn.py ReplayBuffer)
# Reported: "In the ReplayBuffer implementation, you can use self.buffer =
#   collections.deque(maxlen=buffer_limit) ... deque will automatically drop the oldest elements."
# Label: clean. The buffer is bounded by maxlen; tensors are built from it per minibatch only.
import collections
import random

import torch
import torch.nn.functional as F

buffer_limit = 50000
batch_size = 32
device = torch.device("cuda")


class ReplayBuffer:
    def __init__(self):
        self.buffer = collections.deque(maxlen=buffer_limit)

    def put(self, transition):
        self.buffer.append(transition)

    def sample(self, n):
        mini_batch = random.sample(self.buffer, n)
        s_lst, a_lst, r_lst, s_prime_lst, done_mask_lst = [], [], [], [], []
        for transition in mini_batch:
            s, a, r, s_prime, done_mask = transition
            s_lst.append(s)
            a_lst.append([a])
            r_lst.append([r])
            s_prime_lst.append(s_prime)
            done_mask_lst.append([done_mask])
        return (torch.tensor(s_lst, dtype=torch.float, device=device), torch.tensor(a_lst, device=device),
                torch.tensor(r_lst, device=device), torch.tensor(s_prime_lst, dtype=torch.float, device=device),
                torch.tensor(done_mask_lst, device=device))

    def size(self):
        return len(self.buffer)


def train(q, q_target, memory, optimizer):
    for i in range(10):
        s, a, r, s_prime, done_mask = memory.sample(batch_size)
        q_out = q(s)
        q_a = q_out.gather(1, a)
        max_q_prime = q_target(s_prime).max(1)[0].unsqueeze(1)
        target = r + 0.98 * max_q_prime * done_mask
        loss = F.smooth_l1_loss(q_a, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(env, q, q_target, optimizer):
    memory = ReplayBuffer()
    for n_epi in range(10000):
        s = env.reset()
        done = False
        while not done:
            a = q.sample_action(torch.from_numpy(s).float().to(device), 0.08)
            s_prime, r, done, info = env.step(a)
            done_mask = 0.0 if done else 1.0
            memory.put((s, a, r / 100.0, s_prime, done_mask))
            s = s_prime
        if memory.size() > 2000:
            train(q, q_target, memory, optimizer)
