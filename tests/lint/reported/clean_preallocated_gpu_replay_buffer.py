# Source: https://github.com/mani-skill/ManiSkill/issues/881 (examples/baselines/sac/sac.py ReplayBuffer)
# Reported: "why a queue (e.g., collections.deque in Python) wasn't used" - "storing cuda torch
#   tensors is faster this way. Python deque is designed for python primitives and cpu objects".
# Label: clean. Fixed-size CUDA tensors written in place at a wrapping position.
from dataclasses import dataclass

import torch


@dataclass
class ReplayBufferSample:
    obs: torch.Tensor
    next_obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor


class ReplayBuffer:
    def __init__(self, env, num_envs: int, buffer_size: int, storage_device: torch.device, sample_device: torch.device):
        self.buffer_size = buffer_size
        self.pos = 0
        self.full = False
        self.num_envs = num_envs
        self.storage_device = storage_device
        self.sample_device = sample_device
        self.per_env_buffer_size = buffer_size // num_envs
        shape = (self.per_env_buffer_size, self.num_envs)
        self.obs = torch.zeros(shape + env.single_observation_space.shape).to(storage_device)
        self.next_obs = torch.zeros(shape + env.single_observation_space.shape).to(storage_device)
        self.actions = torch.zeros(shape + env.single_action_space.shape).to(storage_device)
        self.rewards = torch.zeros(shape).to(storage_device)
        self.dones = torch.zeros(shape).to(storage_device)

    def add(self, obs: torch.Tensor, next_obs: torch.Tensor, action: torch.Tensor, reward: torch.Tensor, done: torch.Tensor):
        if self.storage_device == torch.device("cpu"):
            obs, next_obs, action, reward, done = obs.cpu(), next_obs.cpu(), action.cpu(), reward.cpu(), done.cpu()
        self.obs[self.pos] = obs
        self.next_obs[self.pos] = next_obs
        self.actions[self.pos] = action
        self.rewards[self.pos] = reward
        self.dones[self.pos] = done
        self.pos += 1
        if self.pos == self.per_env_buffer_size:
            self.full = True
            self.pos = 0

    def sample(self, batch_size: int):
        upper = self.per_env_buffer_size if self.full else self.pos
        batch_inds = torch.randint(0, upper, size=(batch_size,))
        env_inds = torch.randint(0, self.num_envs, size=(batch_size,))
        return ReplayBufferSample(
            obs=self.obs[batch_inds, env_inds].to(self.sample_device),
            next_obs=self.next_obs[batch_inds, env_inds].to(self.sample_device),
            actions=self.actions[batch_inds, env_inds].to(self.sample_device),
            rewards=self.rewards[batch_inds, env_inds].to(self.sample_device),
            dones=self.dones[batch_inds, env_inds].to(self.sample_device),
        )
