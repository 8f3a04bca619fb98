# Source: https://github.com/tier4/Diffusion-Planner/pull/372 (the pull request fixed
#   diffusion_planner/train_epoch.py; this is another training loop of the same repository,
#   preference_optimization/train_dpo.py at snapshot 8314659a6d9e4ac6d8220aae161120dbee1817b9:
#   compute_dpo_loss and train_epoch, docstrings cut)
# Reported (for train_epoch.py): per-batch loss dicts with graphs were kept until the end of the
#   epoch.
# Pattern: compute_dpo_loss sums graph-carrying per-sample losses (total_loss += loss) on purpose:
#   the sum is returned and backpropagated in the same step; train_epoch then accumulates
#   loss.item() floats, and the metrics dict takes .item() under no_grad.
# Label: control: nothing here keeps GPU memory across steps
import argparse
import json
import os
import shutil
import sys
from datetime import datetime
from pathlib import Path

# Ensure parent directory is in path for diffusion_planner imports
parent_dir = Path(__file__).resolve().parent.parent
if str(parent_dir) not in sys.path:
    sys.path.insert(0, str(parent_dir))

import torch
from diffusion_planner.model.diffusion_planner import Diffusion_Planner
from torch import optim
from torch.utils.data import DataLoader

from preference_optimization.annotation_gui import collect_preferences
from preference_optimization.annotation_ros_node import AnnotationRosServer
from preference_optimization.model_utils import load_model
from preference_optimization.preference_collection import generate_rule_based_preferences
from preference_optimization.trainer import DPOTrainer
def compute_dpo_loss(
    policy_model: Diffusion_Planner,
    reference_model: Diffusion_Planner,
    batch: list[dict],
    args,
    model_args,
) -> tuple[torch.Tensor, dict]:
    total_loss = 0.0
    metrics = {
        "accuracy": 0.0,
        "avg_log_ratio": 0.0,
        "avg_reward_margin": 0.0,
    }

    for sample in batch:
        # Determine which is preferred
        data_raw = sample["data"]
        traj_wi = sample["trajectory_w"]
        traj_lo = sample["trajectory_l"]

        # Sample shared diffusion time but separate noise for winner and loser
        B = data_raw["ego_current_state"].shape[0]
        P = 1 + model_args.predicted_neighbor_num
        future_len = model_args.future_len

        # Separate noise for winner and loser
        noise_w = torch.randn(B, P, future_len, 4, device=DEVICE)
        noise_l = torch.randn(B, P, future_len, 4, device=DEVICE)
        eps = 1e-3
        t = torch.rand(B, device=DEVICE) * (1 - eps) + eps

        # Compute losses under policy model (with different noise)
        # Deep copy data to avoid inplace modifications affecting gradient computation
        data_w = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in data_raw.items()}
        data_l = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in data_raw.items()}

        data_w["delay"] = torch.zeros(B, device=DEVICE)  # Add dummy delay if model expects it
        data_l["delay"] = torch.zeros(B, device=DEVICE)

        l_w = compute_trajectory_loss(policy_model, data_w, traj_wi, model_args, noise_w, t)
        l_l = compute_trajectory_loss(policy_model, data_l, traj_lo, model_args, noise_l, t)

        # Compute losses under reference model (with same noise as policy)
        with torch.no_grad():
            data_ref_w = {
                k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in data_raw.items()
            }
            data_ref_l = {
                k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in data_raw.items()
            }

            l_ref_w = compute_trajectory_loss(
                reference_model, data_ref_w, traj_wi, model_args, noise_w.clone(), t
            )
            l_ref_l = compute_trajectory_loss(
                reference_model, data_ref_l, traj_lo, model_args, noise_l.clone(), t
            )

        # Compute DPO loss
        # User's formula: -log(sigma(-beta * ((l_w - l_ref_w) - (l_l - l_ref_l))))
        # Since l(x) is MSE loss (lower is better), we want:
        # - l_w to decrease more than l_l (relative to reference)
        # - (l_w - l_ref_w) < (l_l - l_ref_l)
        # - (l_w - l_ref_w) - (l_l - l_ref_l) < 0
        # So we use -beta * ((l_w - l_ref_w) - (l_l - l_ref_l)) to make it positive when doing well

        loss_diff = (l_w - l_ref_w) - (l_l - l_ref_l)
        loss = -F.logsigmoid(-args.beta * loss_diff)
        total_loss += loss

        # Metrics
        with torch.no_grad():
            reward_margin = -args.beta * loss_diff
            metrics["avg_reward_margin"] += reward_margin.item()
            metrics["avg_log_ratio"] += (-loss_diff).item()
            metrics["accuracy"] += (loss_diff < 0).float().item()

    # Average over batch
    batch_size = len(batch)
    total_loss = total_loss / batch_size
    metrics = {k: v / batch_size for k, v in metrics.items()}

    return total_loss, metrics


def train_epoch(
    policy_model: Diffusion_Planner,
    reference_model: Diffusion_Planner,
    train_loader: DataLoader,
    optimizer: optim.Optimizer,
    args,
    model_args,
) -> dict:
    policy_model.train()

    total_loss = 0.0
    total_accuracy = 0.0
    total_reward_margin = 0.0
    num_batches = 0

    for batch in tqdm(train_loader, desc="Training"):
        optimizer.zero_grad()

        # Compute DPO loss
        loss, metrics = compute_dpo_loss(policy_model, reference_model, batch, args, model_args)

        # Backward and optimize
        loss.backward()
        optimizer.step()

        total_loss += loss.item()
        total_accuracy += metrics["accuracy"]
        total_reward_margin += metrics["avg_reward_margin"]
        num_batches += 1

    return {
        "loss": total_loss / num_batches,
        "accuracy": total_accuracy / num_batches,
        "reward_margin": total_reward_margin / num_batches,
    }
