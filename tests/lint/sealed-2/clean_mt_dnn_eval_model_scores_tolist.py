# Source: https://github.com/namisan/mt-dnn/pull/92 ("turn off autograd during inference", commit
#   72a1d1d0cc383cbe38e05870ff9d68004d20715f); files at the parent of that commit:
#   experiments/glue/glue_utils.py (eval_model) and mt_dnn/model.py (MTDNNModel.predict; the rest
#   of the class cut)
# Reported: "reduces memory usage and speeds up inference" by calling eval_model under
#   torch.no_grad(); the change is about the size of one batch's graph, not growth.
# Pattern: eval_model extends four lists over the whole evaluation set with what predict returns;
#   predict turns the scores into Python lists via score.data.cpu().numpy().tolist() before
#   returning, so nothing kept across batches refers to a GPU tensor or a graph.
# Label: control: nothing here keeps GPU memory across steps
import numpy as np
import torch
import torch.nn.functional as F
from data_utils.task_def import TaskType


class MTDNNModel(object):
    def predict(self, batch_meta, batch_data):
        self.network.eval()
        task_id = batch_meta['task_id']
        task_type = batch_meta['task_type']
        inputs = batch_data[:batch_meta['input_len']]
        if len(inputs) == 3:
            inputs.append(None)
            inputs.append(None)
        inputs.append(task_id)
        score = self.mnetwork(*inputs)
        if batch_meta['pairwise']:
            score = score.contiguous().view(-1, batch_meta['pairwise_size'])
            assert task_type == TaskType.Ranking
            score = F.softmax(score, dim=1)
            score = score.data.cpu()
            score = score.numpy()
            predict = np.zeros(score.shape, dtype=int)
            positive = np.argmax(score, axis=1)
            for idx, pos in enumerate(positive):
                predict[idx, pos] = 1
            predict = predict.reshape(-1).tolist()
            score = score.reshape(-1).tolist()
            return score, predict, batch_meta['true_label']
        else:
            if task_type == TaskType.Classification:
                score = F.softmax(score, dim=1)
            score = score.data.cpu()
            score = score.numpy()
            predict = np.argmax(score, axis=1).tolist()
            score = score.reshape(-1).tolist()
        return score, predict, batch_meta['label']


def eval_model(model, data, metric_meta, use_cuda=True, with_label=True):
    data.reset()
    if use_cuda:
        model.cuda()
    predictions = []
    golds = []
    scores = []
    ids = []
    metrics = {}
    for batch_meta, batch_data in data:
        score, pred, gold = model.predict(batch_meta, batch_data)
        predictions.extend(pred)
        golds.extend(gold)
        scores.extend(score)
        ids.extend(batch_meta['uids'])
    if with_label:
        metrics = calc_metrics(metric_meta, golds, predictions, scores)
    return metrics, predictions, scores, golds, ids
