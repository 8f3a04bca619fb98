"""NOT A LEAK: a DQN replay buffer that holds the last 200 steps on the GPU.

A DQN agent acts in 64 copies of a small synthetic environment (simulated on
the device) and stores each step's batch of transitions -- observations,
actions, rewards, next observations, done flags -- in
`ReplayBuffer.transitions`, a `collections.deque(maxlen=200)`. Each step adds
one new 64 x 128 float32 observation batch (a step's next observations are the
following step's observations) and three small tensors: about 33 KiB. For the
first 200 steps GPU memory grows by that much every step, exactly like a leak,
and for much longer than any warm-up; then the deque drops its oldest entry
for each new one and memory is flat. Only the holder tells the two apart: the
growing container is bounded (deque with maxlen), so the growth stops by
construction.

Verdict: NO LEAK (cause: bounded-growth; holder: deque `transitions`, maxlen 200).
"""
import argparse
import collections
import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

ENVS = 64
OBSERVATION = 128
ACTIONS = 6
CAPACITY = 200  # steps of 64 transitions each
SAMPLED_STEPS = 4  # buffer entries per training batch
GAMMA = 0.99


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="environment and optimizer steps (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class ReplayBuffer:
    """The last `capacity` steps of transitions; the oldest is dropped when full."""

    def __init__(self, capacity, seed=0):
        self.transitions = collections.deque(maxlen=capacity)
        self.rng = random.Random(seed)

    def push(self, observation, action, reward, next_observation, done):
        self.transitions.append((observation, action, reward, next_observation, done))

    def sample(self, count):
        chosen = self.rng.sample(range(len(self.transitions)), min(count, len(self.transitions)))
        columns = zip(*(self.transitions[i] for i in chosen))
        return [torch.cat(column) for column in columns]


class VectorEnv:
    """64 copies of a random linear system; reward is high near a target state."""

    def __init__(self, device):
        self.dynamics = torch.randn(ACTIONS, OBSERVATION, OBSERVATION, device=device) * 0.1
        self.target = torch.randn(OBSERVATION, device=device)
        self.state = torch.randn(ENVS, OBSERVATION, device=device)
        self.steps = 0

    def step(self, action):
        moved = torch.tanh(torch.einsum("eo,eop->ep", self.state, self.dynamics[action]))
        self.state = moved + 0.1 * torch.randn_like(moved)
        self.steps += 1
        reward = -(self.state - self.target).pow(2).mean(dim=1)
        done = torch.full((ENVS,), self.steps % 50 == 0, device=self.state.device)
        return self.state, reward, done


def train(steps, device):
    torch.manual_seed(0)
    env = VectorEnv(device)
    q_net = nn.Sequential(nn.Linear(OBSERVATION, 256), nn.ReLU(), nn.Linear(256, ACTIONS)).to(device)
    target_net = nn.Sequential(nn.Linear(OBSERVATION, 256), nn.ReLU(), nn.Linear(256, ACTIONS)).to(device)
    target_net.load_state_dict(q_net.state_dict())
    optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
    buffer = ReplayBuffer(CAPACITY)
    observation = env.state
    for step in range(steps):
        with torch.no_grad():
            greedy = q_net(observation).argmax(dim=1)
        explore = torch.rand(ENVS, device=device) < 0.1
        action = torch.where(explore, torch.randint(0, ACTIONS, (ENVS,), device=device), greedy)
        next_observation, reward, done = env.step(action)
        buffer.push(observation, action, reward, next_observation, done)
        observation = next_observation

        states, actions, rewards, next_states, dones = buffer.sample(SAMPLED_STEPS)
        with torch.no_grad():
            best_next = target_net(next_states).max(dim=1).values
            target = rewards + GAMMA * best_next * (~dones).float()
        chosen_q = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(chosen_q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 99:
            target_net.load_state_dict(q_net.state_dict())
    return loss.item(), len(buffer.transitions)


def main():
    args = parse_args()
    loss, stored = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f buffer_entries=%d capacity=%d" % (args.steps, loss, stored, CAPACITY))


if __name__ == "__main__":
    main()
