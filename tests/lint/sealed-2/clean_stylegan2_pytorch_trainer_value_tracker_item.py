# Source: https://github.com/adriansahlman/stylegan2_pytorch/pull/11 ("Fixes for CUDA memory issues"),
#   file stylegan2/train.py after the fix (commit 76db50ec7766107ab742e2aa241f50491cf3e226): Trainer._backward and Trainer.train
#   (the constructor, checkpointing and other methods cut), with lerp and ValueTracker from
#   stylegan2/utils.py, which train() uses for its progress line
# Reported: "the memory issues during loss.backwards() were due to saving the computation graph for
#   loss for each iteration"; the fix returns loss.item() from _backward and adds loss.item().
# Pattern: G_loss / D_loss / G_reg_loss / D_reg_loss are Python floats reset at every iteration;
#   ValueTracker.add keeps a running average per name in self.values[name], but converts tensors
#   with .item() before storing, and the tensorboard writer gets the floats.
# Label: control: nothing here keeps GPU memory across iterations
import numbers
import warnings
import functools
import os
import time
import sys
import json
import numpy as np
import torch
import torch.utils.tensorboard
from torch import nn
import torchvision
try:
    import apex
    from apex import amp
except ImportError:
    pass

from . import models, utils, loss_fns




def lerp(a, b, beta):
    if isinstance(beta, numbers.Number):
        if beta == 1:
            return b
        elif beta == 0:
            return a
    if torch.is_tensor(a) and a.dtype == torch.float32:
        # torch lerp only available for fp32
        return torch.lerp(a, b, beta)
    # More numerically stable than a + beta * (b - a)
    return (1 - beta) * a + beta * b


class ValueTracker:

    def __init__(self, beta=0.95):
        self.beta = beta
        self.values = {}

    def add(self, name, value, beta=None):
        if torch.is_tensor(value):
            value = value.item()
        if beta is None:
            beta = self.beta
        if name not in self.values:
            self.values[name] = value
        else:
            self.values[name] = lerp(value, self.values[name], beta)

    def __getitem__(self, key):
        return self.values[key]

    def __str__(self):
        string = ''
        for i, name in enumerate(sorted(self.values.keys())):
            if i and i % 3 == 0:
                string += '\n'
            elif string:
                string += ', '
            format_string = '{}: {}'
            if isinstance(self.values[name], float):
                format_string = '{}: {:.4g}'
            string += format_string.format(name, self.values[name])
        return string


class Trainer:

    def _backward(self, loss, opt, mul=1, subdivisions=None):
        """
        Reduce loss by world size and subdivisions before
        calling backward for the loss. Loss scaling is
        performed when mixed precision training is
        enabled.
        Arguments:
            loss (torch.Tensor)
            opt (torch.optim.Optimizer)
            mul (float): Loss weight. Default value is 1.
            subdivisions (int, optional): The number of
                subdivisions to divide by. If this is
                not specified, the subdvisions from
                the specified batch and device size
                at construction is used.
        Returns:
            loss (torch.Tensor): The loss scaled by mul
                and subdivisions but not by world size.
        """
        if loss is None:
            return 0
        mul /= subdivisions or self.subdivisions
        mul /= self.world_size or 1
        if mul != 1:
            loss *= mul
        if self.half:
            with amp.scale_loss(loss, opt) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        #get the scalar only
        return loss.item() * (self.world_size or 1)

    def train(self, iterations, callbacks=None, verbose=True):
        """
        Train the models for a specific number of iterations.
        Arguments:
            iterations (int): Number of iterations to train for.
            callbacks (callable, list, optional): One
                or more callbacks to call at the end of each
                iteration. The function is given the total
                number of batches that have been processed since
                this trainer object was initialized (not reset
                when loading a saved checkpoint).
                Default value is None (unused).
            verbose (bool): Write progress to stdout.
                Default value is True.
        """
        evaluated_metrics = {}
        if self.rank:
            verbose=False
        if verbose:
            progress = utils.ProgressWriter(iterations)
            value_tracker = utils.ValueTracker()
        for _ in range(iterations):
            # Figure out if G and/or D be
            # regularized this iteration
            G_reg = self.G_reg is not None
            if self.G_reg_interval and G_reg:
                G_reg = self.seen % self.G_reg_interval == 0
            D_reg = self.D_reg is not None
            if self.D_reg_interval and D_reg:
                D_reg = self.seen % self.D_reg_interval == 0

            # -----| Train G |----- #

            # Disable gradients for D while training G
            self.D.requires_grad_(False)

            for _ in range(self.G_iter):
                self.G_opt.zero_grad()

                G_loss = 0
                for i in range(self.subdivisions):
                    latents, latent_labels = self.prior_generator(
                        multi_latent_prob=self.style_mix_prob)
                    loss, _ = self.G_loss(
                        G=self.G,
                        D=self.D,
                        latents=latents,
                        latent_labels=latent_labels
                    )
                    G_loss += self._backward(loss, self.G_opt)

                if G_reg:
                    if self.G_reg_interval:
                        # For lazy regularization, even if the interval
                        # is set to 1, the optimization step is taken
                        # before the gradients of the regularization is gathered.
                        self._sync_distributed(G=self.G)
                        self.G_opt.step()
                        self.G_opt.zero_grad()
                    G_reg_loss = 0
                    # Pathreg is expensive to compute which
                    # is why G regularization has its own settings
                    # for subdivisions and batch size.
                    for i in range(self.G_reg_subdivisions):
                        latents, latent_labels = self.prior_generator(
                            batch_size=self.G_reg_device_batch_size,
                            multi_latent_prob=self.style_mix_prob
                        )
                        _, reg_loss = self.G_reg(
                            G=self.G,
                            latents=latents,
                            latent_labels=latent_labels
                        )
                        G_reg_loss += self._backward(
                            reg_loss,
                            self.G_opt, mul=self.G_reg_interval or 1,
                            subdivisions=self.G_reg_subdivisions
                        )
                self._sync_distributed(G=self.G)
                self.G_opt.step()
                # Update moving average of weights after
                # each G training subiteration
                if self.Gs is not None:
                    self.Gs.update()

            # Re-enable gradients for D
            self.D.requires_grad_(True)

            # -----| Train D |----- #

            # Disable gradients for G while training D
            self.G.requires_grad_(False)

            for _ in range(self.D_iter):
                self.D_opt.zero_grad()

                D_loss = 0
                for i in range(self.subdivisions):
                    latents, latent_labels = self.prior_generator(
                        multi_latent_prob=self.style_mix_prob)
                    reals, real_labels = self._get_batch()
                    loss, _ = self.D_loss(
                        G=self.G,
                        D=self.D,
                        latents=latents,
                        latent_labels=latent_labels,
                        reals=reals,
                        real_labels=real_labels
                    )
                    D_loss += self._backward(loss, self.D_opt)
#                     D_loss += loss
                    D_loss += loss.item()

                if D_reg:
                    if self.D_reg_interval:
                        # For lazy regularization, even if the interval
                        # is set to 1, the optimization step is taken
                        # before the gradients of the regularization is gathered.
                        self._sync_distributed(D=self.D)
                        self.D_opt.step()
                        self.D_opt.zero_grad()
                    D_reg_loss = 0
                    for i in range(self.subdivisions):
                        latents, latent_labels = self.prior_generator(
                            multi_latent_prob=self.style_mix_prob)
                        reals, real_labels = self._get_batch()
                        _, reg_loss = self.D_reg(
                            G=self.G,
                            D=self.D,
                            latents=latents,
                            latent_labels=latent_labels,
                            reals=reals,
                            real_labels=real_labels
                        )
                        D_reg_loss += self._backward(
                            reg_loss, self.D_opt, mul=self.D_reg_interval or 1)
                self._sync_distributed(D=self.D)
                self.D_opt.step()

            # Re-enable grads for G
            self.G.requires_grad_(True)

            if self.tb_writer is not None or verbose:
                # In case verbose is true and tensorboard logging enabled
                # we calculate grad norm here to only do it once as well
                # as making sure we do it before any metrics that may
                # possibly zero the grads.
                G_grad_norm = utils.get_grad_norm_from_optimizer(self.G_opt)
                D_grad_norm = utils.get_grad_norm_from_optimizer(self.D_opt)

            for name, metric in self.metrics.items():
                if not metric['interval'] or self.seen % metric['interval'] == 0:
                    evaluated_metrics[name] = metric['eval_fn']()

            # Printing and logging

            # Tensorboard logging
            if self.tb_writer is not None:
                self.tb_writer.add_scalar('Loss/G_loss', G_loss, self.seen)
                if G_reg:
                    self.tb_writer.add_scalar('Loss/G_reg', G_reg_loss, self.seen)
                    self.tb_writer.add_scalar('Grad_norm/G_reg', G_grad_norm, self.seen)
                    self.tb_writer.add_scalar('Params/pl_avg', self.pl_avg, self.seen)
                else:
                    self.tb_writer.add_scalar('Grad_norm/G_loss', G_grad_norm, self.seen)
                self.tb_writer.add_scalar('Loss/D_loss', D_loss, self.seen)
                if D_reg:
                    self.tb_writer.add_scalar('Loss/D_reg', D_reg_loss, self.seen)
                    self.tb_writer.add_scalar('Grad_norm/D_reg', D_grad_norm, self.seen)
                else:
                    self.tb_writer.add_scalar('Grad_norm/D_loss', D_grad_norm, self.seen)
                for name, value in evaluated_metrics.items():
                    self.tb_writer.add_scalar('Metrics/{}'.format(name), value, self.seen)

            # Printing
            if verbose:
                value_tracker.add('seen', self.seen + 1, beta=0)
                value_tracker.add('G_lr', self.G_opt.param_groups[0]['lr'], beta=0)
                value_tracker.add('G_loss', G_loss)
                if G_reg:
                    value_tracker.add('G_reg', G_reg_loss)
                    value_tracker.add('G_reg_grad_norm', G_grad_norm)
                    value_tracker.add('pl_avg', self.pl_avg, beta=0)
                else:
                    value_tracker.add('G_loss_grad_norm', G_grad_norm)
                value_tracker.add('D_lr', self.D_opt.param_groups[0]['lr'], beta=0)
                value_tracker.add('D_loss', D_loss)
                if D_reg:
                    value_tracker.add('D_reg', D_reg_loss)
                    value_tracker.add('D_reg_grad_norm', D_grad_norm)
                else:
                    value_tracker.add('D_loss_grad_norm', D_grad_norm)
                for name, value in evaluated_metrics.items():
                    value_tracker.add(name, value, beta=0)
                progress.write(str(value_tracker))

            # Callback
            for callback in utils.to_list(callbacks) + self.callbacks:
                callback(self.seen)

            self.seen += 1
            
            # clear cache
            torch.cuda.empty_cache()
            # Handle checkpointing
            if not self.rank and self.checkpoint_dir and self.checkpoint_interval:
                if self.seen % self.checkpoint_interval == 0:
                    checkpoint_path = os.path.join(
                        self.checkpoint_dir,
                        '{}_{}'.format(self.seen, time.strftime('%Y-%m-%d_%H-%M-%S'))
                    )
                    self.save_checkpoint(checkpoint_path)

        if verbose:
            progress.close()

