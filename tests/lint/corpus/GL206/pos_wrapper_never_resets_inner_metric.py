import torchmetrics.detection as detection
from torchmetrics import Metric


class MeanAveragePrecision(Metric):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.metric = detection.MeanAveragePrecision()

    def update(self, outputs, labels):
        self.metric.update(outputs, labels)  # expect: GL206

    def compute(self):
        return self.metric.compute()
