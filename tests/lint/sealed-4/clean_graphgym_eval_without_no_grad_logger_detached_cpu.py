# Source: https://github.com/snap-stanford/GraphGym/pull/11 ("add torch.no_grad() before
#   evaluation"), commit
#   https://github.com/snap-stanford/GraphGym/commit/34c463c120435ff46d5e78741dfb808c19340d4e; files
#   graphgym/logger.py (excerpt: the Logger class) and graphgym/train.py (whole) before that commit
# Reported: the pull request adds `@torch.no_grad()` to eval_epoch (title: "add torch.no_grad()
#   before evaluation"); no growth was reported.
# Pattern: look-alike, no growth: eval_epoch runs the model with autograd on (the change above only
#   saves the memory of one batch's graph) and passes every batch's outputs to a Logger that
#   lives for the whole run and appends them to its lists `self._true` / `self._pred`. But what
#   is stored is `.detach().cpu()` copies and `loss.item()`, so no graph and no CUDA memory is
#   kept; each step's graph is freed when `pred`, `true` and `loss` are rebound, and the lists are
#   emptied by `reset()` in write_epoch after every epoch.
# Label: control: nothing here keeps GPU memory across steps
# graphgym/logger.py (excerpt: the Logger class)
import torch
import math
import os
import sys
import logging
from graphgym.config import cfg
from graphgym.utils.io import dict_to_json, dict_to_tb
import pdb

from sklearn.metrics import *
from tensorboardX import SummaryWriter


# (... cut: setup_printing)


class Logger(object):
    def __init__(self, iter_total, num_labels, name='train', task_type=None):
        self._iter_total = iter_total
        self._num_labels = num_labels
        self._epoch_total = cfg.optim.max_epoch
        self._time_total = 0  # won't be reset
        self.name = name

        if task_type == None:
            if cfg.dataset.task_type == 'classification':
                if self._num_labels <= 2:
                    self.task_type = 'classification_binary'
                else:
                    self.task_type = 'classification_multi'
            else:
                self.task_type = cfg.dataset.task_type
        else:
            self.task_type = task_type

        self.out_dir = '{}/{}'.format(cfg.out_dir, name)
        os.makedirs(self.out_dir, exist_ok=True)
        if cfg.tensorboard_each_run:
            self.tb_writer = SummaryWriter(self.out_dir)

        self.reset()

    def __getitem__(self, key):
        return getattr(self, key, None)

    def __setitem__(self, key, value):
        setattr(self, key, value)

    def reset(self):
        self._iter = 0
        self._size_current = 0
        self._loss = 0
        self._lr = 0
        self._params = 0
        self._time_used = 0
        self._true = []
        self._pred = []

    # basic properties
    def basic(self):
        return {'loss': round(self._loss / self._size_current, cfg.round),
                'lr': round(self._lr, cfg.round),
                'params': self._params,
                'time_iter': round(self.time_iter(), cfg.round)
                }

    def _get_pred_int(self, pred_score):
        if len(pred_score.shape) == 1 or pred_score.shape[1] == 1:
            return (pred_score > cfg.model.thresh).long()
        else:
            return pred_score.max(dim=1)[1]

    # task properties
    def classification_binary(self):
        true, pred_score = torch.cat(self._true), torch.cat(self._pred)
        pred_int = self._get_pred_int(pred_score)
        return {'accuracy': round(accuracy_score(true, pred_int), cfg.round),
                'precision': round(precision_score(true, pred_int), cfg.round),
                'recall': round(recall_score(true, pred_int), cfg.round),
                'f1': round(f1_score(true, pred_int), cfg.round),
                'auc': round(roc_auc_score(true, pred_score), cfg.round),
                }

    def classification_multi(self):
        true, pred_score = torch.cat(self._true), torch.cat(self._pred)
        pred_int = self._get_pred_int(pred_score)
        return {'accuracy': round(accuracy_score(true, pred_int), cfg.round)}

    def regression(self):
        true, pred = torch.cat(self._true), torch.cat(self._pred)
        return {'mae': float(round(mean_absolute_error(true, pred), cfg.round)),
                'mse': float(round(mean_squared_error(true, pred), cfg.round)),
                'rmse': float(
                    round(math.sqrt(mean_squared_error(true, pred)), cfg.round))
                }

    def time_iter(self):
        return self._time_used / self._iter

    # deprecated
    def eta_epoch(self):
        return self.time_iter() * self._iter_total - self._time_used

    # deprecated
    def eta_total(self, epoch_current):
        time_epoch = self.time_iter() * self._iter_total
        return time_epoch - self._time_used + \
               time_epoch * (self._epoch_total - epoch_current)

    def eta(self, epoch_current):
        epoch_current += 1  # since counter starts from 0
        time_per_epoch = self._time_total / epoch_current
        return time_per_epoch * (self._epoch_total - epoch_current)

    def update_stats(self, true, pred, loss, lr, time_used, params):
        assert true.shape[0] == pred.shape[0]
        self._iter += 1
        self._true.append(true)
        self._pred.append(pred)
        batch_size = true.shape[0]
        self._size_current += batch_size
        self._loss += loss * batch_size
        self._lr = lr
        self._params = params
        self._time_used += time_used
        self._time_total += time_used

    def write_iter(self):
        raise NotImplementedError

    def write_epoch(self, cur_epoch):
        basic_stats = self.basic()

        if self.task_type == 'regression':
            task_stats = self.regression()
        elif self.task_type == 'classification_binary':
            task_stats = self.classification_binary()
        elif self.task_type == 'classification_multi':
            task_stats = self.classification_multi()
        else:
            raise ValueError('Task has to be regression or classification')

        epoch_stats = {'epoch': cur_epoch}
        eta_stats = {'eta': round(self.eta(cur_epoch), cfg.round)}

        if self.name == 'train':
            stats = {**epoch_stats, **eta_stats, **basic_stats, **task_stats}
        else:
            stats = {**epoch_stats, **basic_stats, **task_stats}

        # print
        logging.info('{}: {}'.format(self.name, stats))
        # json
        dict_to_json(stats, '{}/stats.json'.format(self.out_dir))
        # tensorboard
        if cfg.tensorboard_each_run:
            dict_to_tb(stats, self.tb_writer, cur_epoch)
        self.reset()

    def close(self):
        if cfg.tensorboard_each_run:
            self.tb_writer.close()


def create_logger(datasets, loaders):
    loggers = []
    names = ['train', 'val', 'test']
    for i, dataset in enumerate(datasets):
        iter_total = len(loaders[i])
        num_label = datasets[0].num_labels
        loggers.append(Logger(iter_total, num_label, name=names[i]))
    return loggers


# graphgym/train.py (whole file)
import torch
import time
import logging

from graphgym.config import cfg
from graphgym.loss import compute_loss
from graphgym.utils.epoch import is_eval_epoch, is_ckpt_epoch
from graphgym.checkpoint import load_ckpt, save_ckpt, clean_ckpt


def train_epoch(logger, loader, model, optimizer, scheduler):
    model.train()
    time_start = time.time()
    for batch in loader:
        optimizer.zero_grad()
        batch.to(torch.device(cfg.device))
        pred, true = model(batch)
        loss, pred_score = compute_loss(pred, true)
        loss.backward()
        optimizer.step()
        logger.update_stats(true=true.detach().cpu(),
                            pred=pred_score.detach().cpu(),
                            loss=loss.item(),
                            lr=scheduler.get_last_lr()[0],
                            time_used=time.time() - time_start,
                            params=cfg.params)
        time_start = time.time()
    scheduler.step()


def eval_epoch(logger, loader, model):
    model.eval()
    time_start = time.time()
    for batch in loader:
        batch.to(torch.device(cfg.device))
        pred, true = model(batch)
        loss, pred_score = compute_loss(pred, true)
        logger.update_stats(true=true.detach().cpu(),
                            pred=pred_score.detach().cpu(),
                            loss=loss.item(),
                            lr=0,
                            time_used=time.time() - time_start,
                            params=cfg.params)
        time_start = time.time()


def train(loggers, loaders, model, optimizer, scheduler):
    start_epoch = 0
    if cfg.train.auto_resume:
        start_epoch = load_ckpt(model, optimizer, scheduler)
    if start_epoch == cfg.optim.max_epoch:
        logging.info('Checkpoint found, Task already done')
    else:
        logging.info('Start from epoch {}'.format(start_epoch))

    num_splits = len(loggers)
    for cur_epoch in range(start_epoch, cfg.optim.max_epoch):
        train_epoch(loggers[0], loaders[0], model, optimizer, scheduler)
        loggers[0].write_epoch(cur_epoch)
        if is_eval_epoch(cur_epoch):
            for i in range(1, num_splits):
                eval_epoch(loggers[i], loaders[i], model)
                loggers[i].write_epoch(cur_epoch)
        if is_ckpt_epoch(cur_epoch):
            save_ckpt(model, optimizer, scheduler, cur_epoch)
    for logger in loggers:
        logger.close()
    if cfg.train.ckpt_clean:
        clean_ckpt()

    logging.info('Task done, results saved in {}'.format(cfg.out_dir))
