# Source: https://github.com/alexhernandezgarcia/gflownet/pull/133 (commit 5c73856159a357c67f3faf865dd737096b9f7184 "Compute EMAs outside of pytorch", merge a62b4a0c), file gflownet/gflownet.py (after the fix)
# Reported: "the GFlowNet computes a running average of loss for the terminal and the non-terminal states. The issue is that this computation was done with pytorch tensors and without any detach. The result is that the whole pytorch computational graph is maintained in memory ... and grows very fast with every iteration."
# Pattern: the moving averages are computed from losses[1].item() and losses[2].item(), Python floats; all_losses stores .item() floats and is trimmed to 100 entries in lightweight mode.
# Label: control: nothing here keeps GPU memory across steps
"""
GFlowNet
TODO:
    - Seeds
"""
import copy
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import yaml
from omegaconf import OmegaConf
from scipy.special import logsumexp
from torch.distributions import Bernoulli, Categorical
from tqdm import tqdm

from gflownet.utils.buffer import Buffer
from gflownet.utils.common import set_device, set_float_precision, torch2np


class GFlowNetAgent:
    # (... cut)

    def flowmatch_loss(self, it, batch, loginf=1000):
        """
        Computes the loss of a batch

        Args
        ----
        it : int
            Iteration

        batch : ndarray
            A batch of data: every row is a state (list), corresponding to all states
            visited in each state in the batch.

        Returns
        -------
        loss : float
            Loss, as per Equation 12 of https://arxiv.org/abs/2106.04399v1

        term_loss : float
            Loss of the terminal nodes only

        flow_loss : float
            Loss of the intermediate nodes only
        """
        loginf = self._tfloat([loginf])
        # Unpack batch
        (
            states,
            actions,
            parents,
            parents_a,
            done,
            traj_id_parents,
            state_id,
            masks_sf,
            masks_b,
        ) = zip(*batch)
        # Get state/batch id
        parents_batch_id = self._tlong(
            sum([[idx] * len(p) for idx, p in enumerate(parents)], [])
        )
        # Concatenate lists of tensors
        states, parents, parents_a, done, masks_sf = map(
            torch.cat,
            [
                states,
                parents,
                parents_a,
                done,
                masks_sf,
            ],
        )
        parents_a_idx = self.env.actions2indices(parents_a)
        # Compute rewards
        rewards = self.env.reward_torchbatch(states, done)
        assert torch.all(rewards[done] > 0)
        # In-flows
        inflow_logits = -loginf * torch.ones(
            (states.shape[0], self.env.policy_output_dim),
            device=self.device,
        )
        inflow_logits[parents_batch_id, parents_a_idx] = self.forward_policy(
            self.env.statetorch2policy(parents)
        )[torch.arange(parents.shape[0]), parents_a_idx]
        inflow = torch.logsumexp(inflow_logits, dim=1)
        # Out-flows
        outflow_logits = self.forward_policy(self.env.statetorch2policy(states))
        outflow_logits[masks_sf] = -loginf
        outflow = torch.logsumexp(outflow_logits, dim=1)
        outflow = outflow * torch.logical_not(done) - loginf * done
        outflow = torch.logaddexp(torch.log(rewards), outflow)
        # Flow matching loss
        loss = (inflow - outflow).pow(2).mean()
        # Isolate loss at terminating nodes and all other nodes
        with torch.no_grad():
            term_loss = ((inflow - outflow) * done).pow(2).sum() / (done.sum() + 1e-20)
            flow_loss = ((inflow - outflow) * torch.logical_not(done)).pow(2).sum() / (
                torch.logical_not(done).sum() + 1e-20
            )
        return (loss, term_loss, flow_loss), rewards[done.eq(1)]

    def trajectorybalance_loss(self, it, batch, loginf=1000):
        """
        Computes the trajectory balance loss of a batch

        Args
        ----
        it : int
            Iteration

        batch : ndarray
            A batch of data: every row is a state (list), corresponding to all states
            visited in each state in the batch.

        Returns
        -------
        loss : float

        term_loss : float
            Loss of the terminal nodes only

        flow_loss : float
            Loss of the intermediate nodes only
        """
        loginf = self._tfloat([loginf])
        # Unpack batch
        (
            states,
            actions,
            parents,
            parents_a,
            done,
            traj_id_parents,
            state_id,
            masks_sf,
            masks_b,
        ) = zip(*batch)
        # Keep only parents in trajectory
        parents = [
            p[torch.where(torch.all(torch.eq(a, p_a), axis=1))]
            for a, p, p_a in zip(actions, parents, parents_a)
        ]
        traj_id = torch.cat([el[:1] for el in traj_id_parents])
        # Concatenate lists of tensors
        states, actions, parents, done, state_id, masks_sf, masks_b = map(
            torch.cat,
            [
                states,
                actions,
                parents,
                done,
                state_id,
                masks_sf,
                masks_b,
            ],
        )
        # Shift state_id to [1, 2, ...]
        for tid in traj_id.unique():
            state_id[traj_id == tid] = (
                state_id[traj_id == tid] - state_id[traj_id == tid].min() + 1
            )
        # Compute rewards
        rewards = self.env.reward_torchbatch(states, done)
        # Build parents forward masks from state masks
        masks_f = torch.cat(
            [
                masks_sf[torch.where((state_id == sid - 1) & (traj_id == pid))]
                if sid > 1
                else self.mask_source
                for sid, pid in zip(state_id, traj_id)
            ]
        )
        # Forward trajectories
        policy_output_f = self.forward_policy(self.env.statetorch2policy(parents))
        logprobs_f = self.env.get_logprobs(
            policy_output_f, True, actions, states, masks_f, loginf
        )
        sumlogprobs_f = torch.zeros(
            len(torch.unique(traj_id, sorted=True)),
            dtype=self.float,
            device=self.device,
        ).index_add_(0, traj_id, logprobs_f)
        # Backward trajectories
        policy_output_b = self.backward_policy(self.env.statetorch2policy(states))
        logprobs_b = self.env.get_logprobs(
            policy_output_b, False, actions, parents, masks_b, loginf
        )
        sumlogprobs_b = torch.zeros(
            len(torch.unique(traj_id, sorted=True)),
            dtype=self.float,
            device=self.device,
        ).index_add_(0, traj_id, logprobs_b)
        # Sort rewards of done states by ascending traj id
        rewards = rewards[done.eq(1)][torch.argsort(traj_id[done.eq(1)])]
        # Trajectory balance loss
        loss = (
            (self.logZ.sum() + sumlogprobs_f - sumlogprobs_b - torch.log(rewards))
            .pow(2)
            .mean()
        )
        return (loss, loss, loss), rewards

    def unpack_terminal_states(self, batch):
        """
        Unpacks the terminating states and trajectories of a batch and converts them
        to Python lists/tuples.
        """
        # TODO: make sure that unpacked states and trajs are sorted by traj_id (like
        # rewards will be)
        trajs = [[] for _ in range(self.batch_size)]
        states = [None] * self.batch_size
        for el in batch:
            traj_id = el[5][:1].item()
            state_id = el[6][:1].item()
            trajs[traj_id].append(tuple(el[1][0].tolist()))
            if bool(el[4].item()):
                states[traj_id] = tuple(el[0][0].tolist())
        trajs = [tuple(el) for el in trajs]
        return states, trajs

    def train(self):
        # Metrics
        all_losses = []
        all_visited = []
        loss_term_ema = None
        loss_flow_ema = None
        # Generate list of environments
        envs = [self.env.copy().reset() for _ in range(self.batch_size)]
        # Train loop
        pbar = tqdm(range(1, self.n_train_steps + 1), disable=not self.logger.progress)
        for it in pbar:
            # Test
            if self.logger.do_test(it):
                self.l1, self.kl, self.jsd, figs = self.test()
                self.logger.log_test_metrics(
                    self.l1, self.kl, self.jsd, it, self.use_context
                )
                self.logger.log_plots(figs, it, self.use_context)
            t0_iter = time.time()
            data = []
            for j in range(self.sttr):
                batch, times = self.sample_batch(envs)
                data += batch
            for j in range(self.ttsr):
                if self.loss == "flowmatch":
                    losses, rewards = self.flowmatch_loss(
                        it * self.ttsr + j, data
                    )  # returns (opt loss, *metrics)
                elif self.loss == "trajectorybalance":
                    losses, rewards = self.trajectorybalance_loss(
                        it * self.ttsr + j, data
                    )  # returns (opt loss, *metrics)
                else:
                    print("Unknown loss!")
                if not all([torch.isfinite(loss) for loss in losses]):
                    if self.logger.debug:
                        print("Loss is not finite - skipping iteration")
                    if len(all_losses) > 0:
                        all_losses.append([loss for loss in all_losses[-1]])
                else:
                    losses[0].backward()
                    if self.clip_grad_norm > 0:
                        torch.nn.utils.clip_grad_norm_(
                            self.parameters(), self.clip_grad_norm
                        )
                    self.opt.step()
                    self.lr_scheduler.step()
                    self.opt.zero_grad()
                    all_losses.append([i.item() for i in losses])
            # Buffer
            t0_buffer = time.time()
            states_term, trajs_term = self.unpack_terminal_states(batch)
            proxy_vals = self.env.reward2proxy(rewards).tolist()
            rewards = rewards.tolist()
            self.buffer.add(states_term, trajs_term, rewards, proxy_vals, it)
            self.buffer.add(
                states_term, trajs_term, rewards, proxy_vals, it, buffer="replay"
            )
            t1_buffer = time.time()
            times.update({"buffer": t1_buffer - t0_buffer})
            # Log
            if self.logger.lightweight:
                all_losses = all_losses[-100:]
                all_visited = states_term
            else:
                all_visited.extend(states_term)
            # Progress bar
            self.logger.progressbar_update(
                pbar, all_losses, rewards, self.jsd, it, self.use_context
            )
            # Train logs
            t0_log = time.time()
            self.logger.log_train(
                losses=losses,
                rewards=rewards,
                proxy_vals=proxy_vals,
                states_term=states_term,
                batch_size=len(data),
                logz=self.logZ,
                learning_rates=self.lr_scheduler.get_last_lr(),
                step=it,
                use_context=self.use_context,
            )
            t1_log = time.time()
            times.update({"log": t1_log - t0_log})
            # Save intermediate models
            t0_model = time.time()
            self.logger.save_models(self.forward_policy, self.backward_policy, step=it)
            t1_model = time.time()
            times.update({"save_interim_model": t1_model - t0_model})

            # Moving average of the loss for early stopping
            if loss_term_ema and loss_flow_ema:
                loss_term_ema = (
                    self.ema_alpha * losses[1].item() + (1.0 - self.ema_alpha) * loss_term_ema
                )
                loss_flow_ema = (
                    self.ema_alpha * losses[2].item() + (1.0 - self.ema_alpha) * loss_flow_ema
                )
                if (
                    loss_term_ema < self.early_stopping
                    and loss_flow_ema < self.early_stopping
                ):
                    break
            else:
                loss_term_ema = losses[1].item()
                loss_flow_ema = losses[2].item()

            # Log times
            t1_iter = time.time()
            times.update({"iter": t1_iter - t0_iter})
            self.logger.log_time(times, use_context=self.use_context)

        # Save final model
        self.logger.save_models(self.forward_policy, self.backward_policy, final=True)
        # Close logger
        if self.use_context == False:
            self.logger.end()
    # (... cut)
