import torch


class FeatureRecorder:
    def __init__(self, model):
        self.saved = []
        model.backbone.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        self.saved.append(output)  # expect: GL202
