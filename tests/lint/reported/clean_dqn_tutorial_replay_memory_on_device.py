# Source: https://github.com/pytorch/tutorials/pull/842 (intermediate_source/reinforcement_q_learning.py)
# Reported: "Changed the ReplayMemory class to use a deque for self.memory instead of a list, as
#   deque has ... a builtin maxlen keyword argument, that pretty much does the entire
#   cyclic-buffer thing."
# Label: clean. Transitions hold CUDA tensors, but the deque keeps at most `capacity` of them.
import random
from collections import deque, namedtuple

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory(object):
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        """Save a transition"""
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


memory = ReplayMemory(10000)


def run_episode(env, policy_net, select_action):
    state = torch.tensor(env.reset(), dtype=torch.float32, device=device).unsqueeze(0)
    for t in range(1000):
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        reward = torch.tensor([reward], device=device)
        next_state = None if terminated else torch.tensor(observation, dtype=torch.float32, device=device).unsqueeze(0)
        memory.push(state, action, next_state, reward)
        state = next_state
        if terminated or truncated:
            break
