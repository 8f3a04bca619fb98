# Source: https://github.com/amjltc295/pytorch-golden-template/pull/64 (commit 33189d5c192c28c134f76e43b867992f65d34ace "Move no_grad() to WorkerTemplate._update_all_metrics() to prevent GPU memory leak"), files src/worker/worker_template.py, src/worker/training_worker.py and src/model/metric.py (after the change; a look-alike control, no pair: the metrics already ran under no_grad before it)
# Reported: "If no_grad() is not added in the _update() function of a metric, there would be GPU memory leaking issue. As no_grad() is required for all metrics, it is now moved to WorkerTemplate._update_all_metrics()."
# Pattern: every batch's model output goes to the metrics' update() inside torch.no_grad(); TopKAcc sums .item() counts, FIDScore appends Inception activations as .cpu().numpy() arrays to lists that clear() empties when _init_output starts each epoch; the epoch's total_loss sums loss.item().
# Label: control: nothing here keeps GPU memory across steps
# From src/worker/worker_template.py:
import time
from abc import ABC, abstractmethod

import torch
from torchvision.utils import make_grid

from data_loader.base_data_loader import BaseDataLoader
from pipeline.base_pipeline import BasePipeline
from utils.global_config import global_config


class WorkerTemplate(ABC):
    """ Worker template, base class for trainer, validator and tester.

    Child class need to implement at least the _run_and_optimize_model() method
    that deals with the main optimization & model inference.
    """
    def __init__(
        self, pipeline: BasePipeline, data_loader: BaseDataLoader, step: int
    ):
        # Attributes listed below are shared from pipeline among all different workers.
        for attr_name in ['device', 'model', 'evaluation_metrics', 'writer', 'optimize_strategy']:
            setattr(self, attr_name, getattr(pipeline, attr_name))

        self.data_loader = data_loader
        self.step = step  # Tensorboard log step

    # ============ Implement the following functions ==============
    @property
    @abstractmethod
    def enable_grad(self):
        pass

    @abstractmethod
    def _run_and_optimize_model(self, data):
        """ Put data into model and optimize the model"""
        return {}, None

    def _print_log(self, epoch, batch_idx, batch_start_time, loss):
        """ Print messages on terminal. """
        pass

    @abstractmethod
    def _setup_model(self):
        """ Set random seed and self.model.eval() or self.model.train() """
        pass

    @abstractmethod
    def _init_output(self):
        pass

    @abstractmethod
    def _update_output(self, output: dict, products: dict):
        return output

    @abstractmethod
    def _finalize_output(self, epoch_output) -> dict:
        """ The final output of worker.run() will be processed by this
            function, whose responsibility is to create a dictionary contraining
            log messages and/or saved inference outputs. """
        pass

    # ============ Implement the above functions ==============
    def _update_all_metrics(self, data_input, model_output, write=True):
        for metric in self.evaluation_metrics:
            with torch.no_grad():
                value = metric.update(data_input, model_output)
                # some metrics do not have per-batch evaluation (e.g. FID), then value would be None
                if write and value is not None:
                    self.writer.add_scalar(metric.nickname, value)

    # Generally, the following function should not be changed.
    def _write_data_to_tensorboard(self, data, model_output):
        """ Write images to Tensorboard """
        self.writer.add_image("data_input", make_grid(data["data_input"], nrow=4, normalize=True))
        if self.optimize_strategy == 'GAN':
            self.writer.add_image("G_z", make_grid(model_output["G_z"], nrow=4, normalize=True))
            self.writer.add_histogram("dist_G_z", model_output["G_z"])
            self.writer.add_histogram("dist_x", data["data_input"])

    def _setup_writer(self):
        """ Setup Tensorboard writer for each iteration """
        self.writer.set_step(self.step, self.data_loader.name)
        self.step += 1

    def _get_and_write_losses(self, data, model_output):
        """ Calculate losses and write them to Tensorboard
        Losses (dict: nickname -> loss tensor) and total loss (tensor) will be returned.
        """
        losses = {}
        for loss_function in self.loss_functions:
            if loss_function.weight <= 0.0:
                continue
            loss = loss_function(data, model_output) * loss_function.weight
            losses[loss_function.nickname] = loss
            self.writer.add_scalar(f'{loss_function.nickname}', loss.item())
        if len(self.loss_functions) == 0:
            total_loss = torch.zeros([1])
        else:
            total_loss = torch.stack(list(losses.values()), dim=0).sum(dim=0)
        self.writer.add_scalar('total_loss', total_loss.item())
        return losses, total_loss

    def _data_to_device(self, data):
        """ Put data into CPU/GPU """
        for key in data.keys():
            # Dataloader yeilds something that's not tensor, e.g data['video_id']
            if torch.is_tensor(data[key]):
                data[key] = data[key].to(self.device)
        return data

    def _iter_data(self, epoch):
        """
        Iterate through the dataset and do inference.
        Output of this worker will be init and updated(after a batch) here using
        `self._output_init` and `self._output_update`.
        """
        output = self._init_output()
        for batch_idx, data in enumerate(self.data_loader):
            batch_start_time = time.time()
            self._setup_writer()
            data = self._data_to_device(data)
            data['batch_idx'] = batch_idx
            model_output, loss = self._run_and_optimize_model(data)

            products = {
                'data': data,
                'model_output': model_output,
                'loss': loss,
            }

            if batch_idx % global_config.log_step == 0:
                self._write_data_to_tensorboard(data, model_output)
                if global_config.verbosity >= 2:
                    self._print_log(epoch, batch_idx, batch_start_time, loss)

            output = self._update_output(output, products)
        return output

    def run(self, epoch):
        self._setup_model()
        with torch.set_grad_enabled(self.enable_grad):
            epoch_output = self._iter_data(epoch)
        output = self._finalize_output(epoch_output)
        return output


# From src/worker/training_worker.py:
import time

from .worker_template import WorkerTemplate


class TrainingWorker(WorkerTemplate):
    """
    The middle class between WorkerTemplate and Trainer/Validator for
    trainer/validator's common processing of epoch output.
    Note:
        Inherited from WorkerTemplate.
    """
    def _init_output(self):
        """ Initialize epoch statistics like elapsed time, total loss, and metrics """
        epoch_start_time = time.time()
        total_loss = 0
        for metric in self.evaluation_metrics:
            metric.clear()
        return epoch_start_time, total_loss

    def _update_output(self, output: dict, products: dict, write_metric=True):
        """ Update epoch statistics """
        loss = products['loss']
        epoch_start_time, total_loss = output
        total_loss += loss.item()
        self._update_all_metrics(products['data'], products['model_output'], write=write_metric)
        return epoch_start_time, total_loss

    def _average_stats(self, total_loss):
        """ Calculate the average loss/metrics in this epoch """
        avg_loss = total_loss / len(self.data_loader)
        avg_metrics = {metric.nickname: metric.finalize() for metric in self.evaluation_metrics}
        return avg_loss, avg_metrics

    def _finalize_output(self, output):
        """ Return saved inference results along with log messages """
        epoch_start_time, total_loss = output
        avg_loss, avg_metrics = self._average_stats(total_loss)
        log = {
            'elapsed_time (s)': time.time() - epoch_start_time,
            'avg_loss': avg_loss,
        }
        for key, value in avg_metrics.items():
            log[f"avg_{key}"] = value

        return {'log': log}

    def _get_and_write_gan_loss(self, data, model_output, optimize_name):
        """ Calculate GAN loss and write them to Tensorboard
        """
        loss_function = self.gan_loss_functions[optimize_name]
        loss = loss_function(data, model_output) * loss_function.weight
        self.writer.add_scalar(f'{loss_function.nickname}', loss.item())
        return loss


# From src/model/metric.py:
import os
import torch
from abc import abstractmethod
import tempfile

import numpy as np
from torchvision import transforms

from utils.util import DeNormalize, lib_path, import_given_path

inception = import_given_path("inception", os.path.join(lib_path, 'pytorch_fid/inception.py'))
fid_score = import_given_path("fid_score", os.path.join(lib_path, 'pytorch_fid/fid_score.py'))


class BaseMetric(torch.nn.Module):
    def __init__(self, output_key, target_key, nickname):
        super().__init__()
        self.nickname = nickname
        self.output_key = output_key
        self.target_key = target_key

    @abstractmethod
    def clear(self):
        """ Initialize variables needed for metrics calculations.

        This function would be called in TrainingWorker._init_output()
        See the TopKAcc below for example.
        """
        pass

    @abstractmethod
    def update(self, data, output):
        """ Update metric values in each batch.

        This function would be called inside torch.no_grad() in WorkerTemplate._update_all_metrics()
        """
        pass

    @abstractmethod
    def finalize(self):
        """ Calculate the final metric values given the variables updated in each batch. """
        pass


class TopKAcc(BaseMetric):
    def __init__(self, k, output_key, target_key, nickname=None):
        nickname = f'top{self.k}_acc_{target_key}' if nickname is None else nickname
        super().__init__(output_key, target_key, nickname)
        self.k = k

    def clear(self):
        self.total_correct = 0
        self.total_number = 0

    def update(self, data, output):
        logits = output[self.output_key]
        target = data[self.target_key]
        pred = torch.topk(logits, self.k, dim=1)[1]
        assert pred.shape[0] == len(target)
        correct = 0
        for i in range(self.k):
            correct += torch.sum(pred[:, i] == target).item()
        self.total_correct += correct
        self.total_number += len(target)
        return correct / len(target)

    def finalize(self):
        return self.total_correct / self.total_number


class FIDScoreOffline(BaseMetric):
    """
    Module calculating FID score by saving all images into temporary directories
    """

    def __init__(self, output_key, target_key, unnorm_mean=(0.5,), unnorm_std=(0.5,), nickname="FID_InceptionV3"):
        super().__init__(output_key, target_key, nickname)
        self.from_tensor_to_pil = transforms.Compose([
            DeNormalize(unnorm_mean, unnorm_mean),
            transforms.ToPILImage()
        ])
        self.tmp_gt_dir = tempfile.TemporaryDirectory(prefix='gt_')
        self.tmp_out_dir = tempfile.TemporaryDirectory(prefix='out_')

    def clear(self):
        self.tmp_gt_dir.cleanup()
        self.tmp_out_dir.cleanup()
        self.tmp_gt_dir = tempfile.TemporaryDirectory(prefix='gt_')
        self.tmp_out_dir = tempfile.TemporaryDirectory(prefix='out_')

    def _save_img_tensor(self, tensor, buffer_dir):
        """ Save image tensor to a named temporary file and return the name."""
        temp_f = tempfile.NamedTemporaryFile(suffix='.png', dir=buffer_dir.name, delete=False)
        pil_image = self.from_tensor_to_pil(tensor.cpu())
        pil_image.save(temp_f)
        temp_f.close()

    def update(self, data, output):
        for gt_tensor, out_tensor in zip(data[self.target_key], output[self.output_key]):
            self._save_img_tensor(gt_tensor, self.tmp_gt_dir)
            self._save_img_tensor(out_tensor.clamp(-1, 1), self.tmp_out_dir)
        return None

    def finalize(self):
        return fid_score.calculate_fid_given_paths(
            paths=[self.tmp_gt_dir.name, self.tmp_out_dir.name],
            batch_size=10, cuda=True, dims=2048)


class FIDScore(BaseMetric):
    """
    Abstract class of FID score calculator (store inception activation in memory)
    """

    def __init__(self, output_key, target_key, unnorm_mean=(0.5,), unnorm_std=(0.5,), nickname="FID_InceptionV3"):
        super().__init__(output_key, target_key, nickname)
        self._deNormalizer = DeNormalize(unnorm_mean, unnorm_mean)
        self._gt_activations = []
        self._out_activations = []

    def clear(self):
        self._gt_activations = []
        self._out_activations = []

    def _preprocess_tensor(self, tensor):
        tensor = self._deNormalizer(tensor)  # domain: [-1, 1] -> [0, 1]
        tensor = tensor.repeat(1, 3, 1, 1)   # convert 1-channel images to 3-channels
        return tensor

    @abstractmethod
    def _get_activation(self, tensors):
        pass

    def update(self, data, output):
        gt_tensors = self._preprocess_tensor(data[self.target_key])
        out_tensors = self._preprocess_tensor(output[self.output_key])
        self._gt_activations.append(self._get_activation(gt_tensors))
        self._out_activations.append(self._get_activation(out_tensors))
        return None

    def finalize(self):
        gt_activations = np.concatenate(self._gt_activations)
        out_activations = np.concatenate(self._out_activations)
        score = self._get_fid_score(gt_activations, out_activations)
        return score

    def _get_fid_score(self, gt_activations, out_activations):
        """
        Given two distribution of features, compute the FID score between them
        """
        m1 = np.mean(gt_activations, axis=0)
        m2 = np.mean(out_activations, axis=0)
        s1 = np.cov(gt_activations, rowvar=False)
        s2 = np.cov(out_activations, rowvar=False)
        return fid_score.calculate_frechet_distance(m1, s1, m2, s2)


class FIDScoreInceptionV3(FIDScore):
    def __init__(self, *args, **kargs):
        super().__init__(*args, **kargs)
        block_idx = inception.InceptionV3.BLOCK_INDEX_BY_DIM[2048]
        self._backbone = inception.InceptionV3([block_idx])
        self._backbone.eval()

    def _get_activation(self, tensors):
        return self._backbone(tensors)[0].squeeze().cpu().numpy()
