# Source: https://github.com/EleutherAI/DeeperSpeed/pull/34
# Reported: "Keeping all hooked layer outputs on GPU quickly leads to out of memory issues. This PR
#   moves all embeddings to cpu in layer hook." (The hook's container is reconstructed from the
#   PR description.)
# Pattern: a forward hook on each layer appends the layer output (still on the GPU) to a list
#   that keeps growing across forward passes.
# Label: the line marked `# leak` keeps the memory.
import torch


class PipelineEmbeddingRecorder:
    def __init__(self, model, layer_indices):
        self.embeddings = []
        self.handles = []
        for idx in layer_indices:
            layer = model.forward_funcs[idx]
            self.handles.append(layer.register_forward_hook(self.layer_hook))

    def layer_hook(self, module, inputs, output):
        hidden = output[0] if isinstance(output, tuple) else output
        self.embeddings.append(hidden.detach())  # leak

    def remove(self):
        for h in self.handles:
            h.remove()


def run_inference(engine, data_iterator, layer_indices):
    recorder = PipelineEmbeddingRecorder(engine.module, layer_indices)
    with torch.no_grad():
        for batch in data_iterator:
            engine.eval_batch(iter([batch]))
    return recorder.embeddings
