# Source: https://github.com/RUCAIBox/RecBole/pull/307 (commit f8d87147f7a971901bd6d4d19ddf07af34f76db5), file recbox/trainer/trainer.py (before the fix)
# Reported: "FIX: bug of storing loss in each batch cause out of memory in Trainer"
# Pattern: _train_epoch appends each batch's losses (a tensor or a tuple of tensors; their sum is what .backward() is called on) to losses_list for the whole epoch, and only sums them and calls .item() at the end.
# Label: lines marked `# leak` keep the memory (Trainer), `# leak:2` a second leak (KGTrainer)
# @Time   : 2020/6/26
# @Author : Shanlei Mu
# @Email  : slmu@ruc.edu.cn

# UPDATE:
# @Time   : 2020/8/7 18:38, 2020/9/26, 2020/9/26, 2020/9/20, 2020/9/16
# @Author : Zihan Lin, Yupeng Hou, Yushuo Chen, Shanlei Mu, Xingyu Pan
# @Email  : linzihan.super@foxmail.com, houyupeng@ruc.edu.cn, chenyushuo@ruc.edu.cn, slmu@ruc.edu.cn, panxy@ruc.edu.cn

import os
import itertools
import torch
import torch.optim as optim
import numpy as np
import matplotlib.pyplot as plt

from time import time
from logging import getLogger

from recbox.evaluator import TopKEvaluator, LossEvaluator
from recbox.data.interaction import Interaction
from recbox.utils import ensure_dir, get_local_time, DataLoaderType, KGDataLoaderState, EvaluatorType
from recbox.trainer.utils import early_stopping, calculate_valid_score, dict2str


# (AbstractTrainer, optimizer, checkpoint and evaluation methods cut)

class Trainer(AbstractTrainer):
    def __init__(self, config, model):
        super(Trainer, self).__init__(config, model)

        self.logger = getLogger()
        self.learner = config['learner']
        self.learning_rate = config['learning_rate']
        self.epochs = config['epochs']
        self.eval_step = min(config['eval_step'], self.epochs)
        self.stopping_step = config['stopping_step']
        self.valid_metric = config['valid_metric']
        self.valid_metric_bigger = config['valid_metric_bigger']
        self.test_batch_size = config['eval_batch_size']
        self.device = config['device']
        self.checkpoint_dir = config['checkpoint_dir']
        ensure_dir(self.checkpoint_dir)
        saved_model_file = '{}-{}.pth'.format(self.config['model'], get_local_time())
        self.saved_model_file = os.path.join(self.checkpoint_dir, saved_model_file)

        self.start_epoch = 0
        self.cur_step = 0
        self.best_valid_score = -1
        self.best_valid_result = None
        self.train_loss_dict = dict()
        self.optimizer = self._build_optimizer()
        self.eval_type = config['eval_type']
        if self.eval_type == EvaluatorType.INDIVIDUAL:
            self.evaluator = LossEvaluator(config)
        else:
            self.evaluator = TopKEvaluator(config)

        self.item_tensor = None
        self.tot_item_num = None
        self.iid_field = config['ITEM_ID_FIELD']

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        losses_list = []
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            losses = self.model.calculate_loss(interaction)
            loss = sum(losses) if isinstance(losses, tuple) else losses
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
            losses_list.append(losses)  # leak
        if isinstance(losses_list[0], tuple):
            total_losses = []
            for j in range(len(losses_list[0])):
                total_losses.append(sum([losses[j] for losses in losses_list]).item())
            return tuple(total_losses)

        else:
            return sum(losses_list).item()

    def _check_nan(self, loss):
        if torch.isnan(loss):
            raise ValueError('Training loss is nan')

    def generate_train_loss_output(self, epoch_idx, s_time, e_time, losses):
        train_loss_output = "epoch %d training [time: %.2fs, " % (epoch_idx, e_time - s_time)
        if isinstance(losses, tuple):
            for idx, loss in enumerate(losses):
                train_loss_output += 'train_loss%d: %.4f, ' % (idx + 1, loss)
            train_loss_output = train_loss_output[:-2]
        else:
            train_loss_output += "train loss: %.4f" % losses
        return train_loss_output + ']'

    def fit(self, train_data, valid_data=None, verbose=True, saved=True):
        if hasattr(self.model, 'train_preparation'):
            self.model.train_preparation(train_data=train_data, valid_data=valid_data)
        for epoch_idx in range(self.start_epoch, self.epochs):
            # train
            training_start_time = time()
            train_loss = self._train_epoch(train_data, epoch_idx)
            self.train_loss_dict[epoch_idx] = sum(train_loss) if isinstance(train_loss, tuple) else train_loss
            training_end_time = time()
            train_loss_output = \
                self.generate_train_loss_output(epoch_idx, training_start_time, training_end_time, train_loss)
            if verbose:
                self.logger.info(train_loss_output)

            # eval
            if self.eval_step <= 0 or not valid_data:
                if saved:
                    self._save_checkpoint(epoch_idx)
                    update_output = 'Saving current: %s' % self.saved_model_file
                    if verbose:
                        self.logger.info(update_output)
                continue
            if (epoch_idx + 1) % self.eval_step == 0:
                valid_start_time = time()
                valid_score, valid_result = self._valid_epoch(valid_data)
                self.best_valid_score, self.cur_step, stop_flag, update_flag = early_stopping(
                    valid_score, self.best_valid_score, self.cur_step,
                    max_step=self.stopping_step, bigger=self.valid_metric_bigger)
                valid_end_time = time()
                valid_score_output = "epoch %d evaluating [time: %.2fs, valid_score: %f]" % \
                                     (epoch_idx, valid_end_time - valid_start_time, valid_score)
                valid_result_output = 'valid result: \n' + dict2str(valid_result)
                if verbose:
                    self.logger.info(valid_score_output)
                    self.logger.info(valid_result_output)
                if update_flag:
                    if saved:
                        self._save_checkpoint(epoch_idx)
                        update_output = 'Saving current best: %s' % self.saved_model_file
                        if verbose:
                            self.logger.info(update_output)
                    self.best_valid_result = valid_result

                if stop_flag:
                    stop_output = 'Finished training, best eval result in epoch %d' % \
                                  (epoch_idx - self.cur_step * self.eval_step)
                    if verbose:
                        self.logger.info(stop_output)
                    break
        return self.best_valid_score, self.best_valid_result

class KGTrainer(Trainer):
    def __init__(self, config, model):
        super(KGTrainer, self).__init__(config, model)

        self.train_rec_step = config['train_rec_step']
        self.train_kg_step = config['train_kg_step']

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        losses_list = []
        if self.train_rec_step is None or self.train_kg_step is None:
            interaction_state = KGDataLoaderState.RSKG
        else:
            assert self.train_rec_step > 0 and self.train_kg_step > 0
            interaction_state = KGDataLoaderState.RS \
                if epoch_idx % (self.train_rec_step + self.train_kg_step) < self.train_rec_step \
                else KGDataLoaderState.KG
        train_data.set_mode(interaction_state)
        if interaction_state in [KGDataLoaderState.RSKG, KGDataLoaderState.RS]:
            for batch_idx, interaction in enumerate(train_data):
                interaction = interaction.to(self.device)
                self.optimizer.zero_grad()
                losses = self.model.calculate_loss(interaction)
                loss = sum(losses) if isinstance(losses, tuple) else losses
                self._check_nan(loss)
                loss.backward()
                self.optimizer.step()
                losses_list.append(losses)  # leak:2
        elif interaction_state in [KGDataLoaderState.KG]:
            for bath_idx, interaction in enumerate(train_data):
                interaction = interaction.to(self.device)
                self.optimizer.zero_grad()
                losses = self.model.calculate_kg_loss(interaction)
                loss = sum(losses) if isinstance(losses, tuple) else losses
                self._check_nan(loss)
                loss.backward()
                self.optimizer.step()
                losses_list.append(losses)  # leak:2
        if isinstance(losses_list[0], tuple):
            total_losses = []
            for j in range(len(losses_list[0])):
                total_losses.append(sum([losses[j] for losses in losses_list]).item())
            return tuple(total_losses)

        else:
            return sum(losses_list).item()


class KGATTrainer(KGTrainer):
    def __init__(self, config, model):
        super(KGATTrainer, self).__init__(config, model)

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        rs_total_loss, kg_total_loss = 0., 0.

        # train rs
        train_data.set_mode(KGDataLoaderState.RS)
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            loss = self.model.calculate_loss(interaction)
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
            rs_total_loss += loss.item()

        # train kg
        train_data.set_mode(KGDataLoaderState.KG)
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            loss = self.model.calculate_kg_loss(interaction)
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
            kg_total_loss += loss.item()

        # update A
        self.model.update_attentive_A()

        return rs_total_loss, kg_total_loss
