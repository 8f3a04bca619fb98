import torch
from torchmetrics import Metric, RetrievalMAP


class IndexBasedMeter(Metric):
    def __init__(self):
        super().__init__()
        self.metric_func = RetrievalMAP()
        self.add_state("vectors", default=[], dist_reduce_fx=None)

    def update(self, vectors):
        self.vectors.append(vectors.detach().cpu())

    def compute(self):
        scores = torch.cat(self.vectors)
        for batch_scores, target, indexes in self.batches(scores):
            self.metric_func(batch_scores, target, indexes=indexes)  # expect: GL206
        return self.metric_func.compute()
