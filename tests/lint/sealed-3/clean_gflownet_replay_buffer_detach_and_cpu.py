# Source: https://github.com/recursionpharma/gflownet/pull/130 ("Fixes GPU memory overflow when
#   using replay buffer"), files src/gflownet/data/replay_buffer.py and
#   src/gflownet/data/data_source.py after the fix (excerpt: the buffer, and the sampling
#   generator that feeds it)
# Reported: "With config.replay.use = True, we get ... torch.cuda.OutOfMemoryError: CUDA out of
#   memory ... This PR fixes the issue by simply detaching and sending to CPU every tensor getting
#   pushed into the replay buffer."
# Pattern: the same generator and helper push every new trajectory into the buffer, but push now
#   passes the tuple through detach_and_cpu first: what the buffer keeps is detached CPU copies,
#   at most `capacity` of them. No GPU memory or graph is kept.
# Label: control: nothing here keeps GPU memory across steps
from typing import List

import numpy as np
import torch


class ReplayBuffer(object):
    def __init__(self, cfg, rng: np.random.Generator = None):
        self.capacity = cfg.replay.capacity
        self.warmup = cfg.replay.warmup
        assert self.warmup <= self.capacity, "ReplayBuffer warmup must be smaller than capacity"

        self.buffer: List[tuple] = []
        self.position = 0
        self.rng = rng

    def push(self, *args):
        if len(self.buffer) == 0:
            self._input_size = len(args)
        else:
            assert self._input_size == len(args), "ReplayBuffer input size must be constant"
        if len(self.buffer) < self.capacity:
            self.buffer.append(None)
        args = detach_and_cpu(args)
        self.buffer[self.position] = args
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        idxs = self.rng.choice(len(self.buffer), batch_size)
        out = list(zip(*[self.buffer[idx] for idx in idxs]))
        for i in range(len(out)):
            if all([isinstance(x, np.ndarray) for x in out[i]]):
                out[i] = np.stack(out[i], axis=0)
            elif all([isinstance(x, torch.Tensor) for x in out[i]]):
                out[i] = torch.stack(out[i], dim=0)
            else:
                out[i] = list(out[i])
        return out

    def __len__(self):
        return len(self.buffer)


def detach_and_cpu(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
    elif isinstance(x, dict):
        x = {k: detach_and_cpu(v) for k, v in x.items()}
    elif isinstance(x, list):
        x = [detach_and_cpu(v) for v in x]
    elif isinstance(x, tuple):
        x = tuple(detach_and_cpu(v) for v in x)
    return x


class DataSource(torch.utils.data.IterableDataset):
    def __init__(self, cfg, ctx, algo, task, replay_buffer=None):
        self.iterators = []
        self.cfg = cfg
        self.ctx = ctx
        self.algo = algo
        self.task = task
        self.replay_buffer = replay_buffer
        self.active = True
        self.current_iter = 0

    def do_sample_model(self, model, num_from_policy, num_new_replay_samples=None):
        num_new_replay_samples = num_new_replay_samples or 0
        num_samples = max(num_from_policy, num_new_replay_samples)

        def iterator():
            while self.active:
                t = self.current_iter
                p = self.algo.get_random_action_prob(t)
                cond_info = self.task.sample_conditional_information(num_samples, t)
                trajs = self.algo.create_training_data_from_own_samples(model, num_samples, cond_info["encoding"], p)
                self.set_traj_cond_info(trajs, cond_info)
                self.compute_log_rewards(trajs)
                self.send_to_replay(trajs[:num_new_replay_samples])
                batch_info = self.call_sampling_hooks(trajs)
                yield (trajs[:num_from_policy], batch_info)

        self.iterators.append(iterator)
        return self

    def compute_log_rewards(self, trajs):
        flat_rewards = torch.stack([t["flat_rewards"] for t in trajs])
        cond_info = {k: torch.stack([t["cond_info"][k] for t in trajs]) for k in trajs[0]["cond_info"]}
        log_rewards = self.task.cond_info_to_logreward(cond_info, flat_rewards)
        min_r = torch.as_tensor(self.cfg.algo.illegal_action_logreward).float()
        for i in range(len(trajs)):
            trajs[i]["log_reward"] = log_rewards[i] if trajs[i].get("is_valid", True) else min_r

    def send_to_replay(self, trajs):
        if self.replay_buffer is not None:
            for t in trajs:
                self.replay_buffer.push(t, t["log_reward"], t["flat_rewards"], t["cond_info"], t["is_valid"])

    def set_traj_cond_info(self, trajs, cond_info):
        for i in range(len(trajs)):
            trajs[i]["cond_info"] = {k: cond_info[k][i] for k in cond_info}

    def call_sampling_hooks(self, trajs):
        return {}
