# Source: https://github.com/Metta-AI/metta/pull/1139 ("Detaching the LSTM state before storing
#   experience"), code before that change (snapshot dccd233dec6e1d743838bbce2195dee98269bafe): MettaTrainer._rollout from
#   metta/rl/trainer.py and the Experience methods it calls from metta/rl/experience.py
#   (__init__, the other trainer methods and the minibatch sampling cut)
# Reported: the PR describes "computational graphs with LSTM state ... persisting into the experience
#   replay buffer" and adds .detach() to the stored state.
# Pattern: look-alike: the policy forward and the stored LSTM state are made inside
#   torch.no_grad(), so state.lstm_h / lstm_c carry no graph; Experience.store overwrites the one
#   entry per environment slot (self.lstm_h[env_id.start]) and writes the step's tensors into
#   preallocated buffers by index; nothing grows and no graph is kept across steps. (The
#   .detach() added by the PR changes nothing here; judged by this corpus's author.)
# Label: control: nothing here keeps GPU memory across steps
import logging
from collections import defaultdict
from typing import Dict, Optional

import numpy as np
import torch
from torch import Tensor

from metta.agent.policy_state import PolicyState
from metta.agent.util.debug import assert_shape
from metta.common.stopwatch import Stopwatch, with_instance_timer
from metta.mettagrid.mettagrid_env import MettaGridEnv, dtype_actions
from metta.mettagrid.util.dict_utils import unroll_nested_dict


class Experience:
    def store(
        self,
        obs: Tensor,
        actions: Tensor,
        logprobs: Tensor,
        rewards: Tensor,
        dones: Tensor,
        truncations: Tensor,
        values: Tensor,
        env_id: slice,
        mask: Tensor,
        lstm_state: Optional[Dict[str, Tensor]] = None,
    ) -> int:
        """Store a batch of experience."""
        assert isinstance(env_id, slice), (
            f"TypeError: env_id expected to be a slice for segmented storage. Got {type(env_id).__name__} instead."
        )

        num_steps = mask.sum().item()
        episode_length = self.ep_lengths[env_id.start].item()
        indices = self.ep_indices[env_id]

        # Store data in segmented tensors
        batch_slice = (indices, episode_length)
        self.obs[batch_slice] = obs
        self.actions[batch_slice] = actions
        self.logprobs[batch_slice] = logprobs
        self.rewards[batch_slice] = rewards
        self.dones[batch_slice] = dones.float()
        self.truncateds[batch_slice] = truncations.float()
        self.values[batch_slice] = values

        # Update episode tracking
        self.ep_lengths[env_id] += 1

        # Check if episodes are complete and reset if needed
        if episode_length + 1 >= self.bptt_horizon:
            self._reset_completed_episodes(env_id)

        # Update LSTM states if provided
        if lstm_state is not None and env_id.start in self.lstm_h:
            self.lstm_h[env_id.start] = lstm_state["lstm_h"]
            self.lstm_c[env_id.start] = lstm_state["lstm_c"]

        return int(num_steps)

    def _reset_completed_episodes(self, env_id: slice) -> None:
        """Reset episode tracking for completed episodes."""
        num_full = env_id.stop - env_id.start
        # Use pre-allocated range tensor and slice it
        self.ep_indices[env_id] = (self.free_idx + self._range_tensor[:num_full]) % self.segments
        self.ep_lengths[env_id] = 0
        self.free_idx = (self.free_idx + num_full) % self.segments
        self.full_rows += num_full

    def get_lstm_state(self, env_id_start: int) -> tuple[Optional[Tensor], Optional[Tensor]]:
        """Get LSTM state as tensors."""
        if env_id_start not in self.lstm_h:
            return None, None
        return self.lstm_h[env_id_start], self.lstm_c[env_id_start]

    def set_lstm_state(self, env_id_start: int, lstm_h: Tensor, lstm_c: Tensor) -> None:
        """Set LSTM state."""
        if env_id_start in self.lstm_h:
            self.lstm_h[env_id_start] = lstm_h
            self.lstm_c[env_id_start] = lstm_c

    def reset_for_rollout(self) -> None:
        """Reset tracking variables for a new rollout."""
        self.full_rows = 0
        self.free_idx = self.total_agents % self.segments
        self.ep_indices = self._range_tensor % self.segments
        self.ep_lengths.zero_()



class MettaTrainer:
    @with_instance_timer("_rollout")
    def _rollout(self):
        experience = self.experience
        trainer_cfg = self.trainer_cfg
        device = self.device

        policy = self.policy
        infos = defaultdict(list)
        raw_infos = []  # Collect raw info for batch processing later
        experience.reset_for_rollout()

        while not experience.ready_for_training:
            with self.timer("_rollout.env"):
                o, r, d, t, info, env_id, mask = self.vecenv.recv()
                if trainer_cfg.require_contiguous_env_ids:
                    raise ValueError(
                        "We are assuming contiguous eng id is always False. async_factor == num_workers = "
                        f"{trainer_cfg.async_factor} != {trainer_cfg.num_workers}"
                    )

                training_env_id = slice(env_id[0], env_id[-1] + 1)

            # Convert mask to tensor once
            mask = torch.as_tensor(mask)
            num_steps = int(mask.sum().item())
            self.agent_step += num_steps

            # Convert to tensors once
            o = torch.as_tensor(o).to(device, non_blocking=True)
            r = torch.as_tensor(r).to(device, non_blocking=True)
            d = torch.as_tensor(d).to(device, non_blocking=True)
            t = torch.as_tensor(t).to(device, non_blocking=True)

            with torch.no_grad():
                state = PolicyState()

                # Use LSTM state access for performance
                lstm_h, lstm_c = experience.get_lstm_state(training_env_id.start)
                if lstm_h is not None:
                    state.lstm_h = lstm_h
                    state.lstm_c = lstm_c

                # Use pre-moved tensor
                actions, selected_action_log_probs, _, value, _ = policy(o, state)

                if __debug__:
                    assert_shape(selected_action_log_probs, ("BT",), "selected_action_log_probs")
                    assert_shape(actions, ("BT", 2), "actions")

                # Store LSTM state for performance
                lstm_state_to_store = None
                if state.lstm_h is not None:
                    lstm_state_to_store = {"lstm_h": state.lstm_h, "lstm_c": state.lstm_c}

                if str(self.device).startswith("cuda"):
                    torch.cuda.synchronize()

            value = value.flatten()
            # mask already converted to tensor above

            # All tensors are already on device, avoid redundant transfers
            experience.store(
                obs=o,
                actions=actions,
                logprobs=selected_action_log_probs,
                rewards=r,
                dones=d,
                truncations=t,
                values=value,
                env_id=training_env_id,
                mask=mask,
                lstm_state=lstm_state_to_store,
            )

            # At this point, infos contains lists of values collected across:
            # 1. Multiple vectorized environments managed by this GPU's vecenv
            # 2. Multiple rollout steps (until experience buffer is full)
            #
            # - Some stats (like "episode/reward") appear only when episodes complete
            # - Other stats might appear every step
            #
            # These will later be averaged in _process_stats() to get mean values
            # across all environments on this GPU. Stats from other GPUs (if using
            # distributed training) are handled separately and not aggregated here.
            if info:
                raw_infos.extend(info)

            with self.timer("_rollout.env"):
                self.vecenv.send(actions.cpu().numpy().astype(dtype_actions))

        # Batch process info dictionaries after rollout
        for i in raw_infos:
            for k, v in unroll_nested_dict(i):
                infos[k].append(v)

        # Batch process stats more efficiently
        for k, v in infos.items():
            if isinstance(v, np.ndarray):
                v = v.tolist()

            if isinstance(v, list):
                self.stats.setdefault(k, []).extend(v)
            else:
                if k not in self.stats:
                    self.stats[k] = v
                else:
                    try:
                        self.stats[k] += v
                    except TypeError:
                        self.stats[k] = [self.stats[k], v]  # fallback: bundle as list

        # TODO: Better way to enable multiple collects
        return self.stats, infos

