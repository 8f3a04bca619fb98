# Source: https://github.com/TRI-ML/packnet-sfm/pull/51
# Reported: "Fix memory leak: Detach loss before appending it to the training output list."
# Pattern: a trainer collects every batch's output dict (with the graph-carrying loss) for the
#   epoch-end hook.
# Label: the line marked `# leak` keeps the memory.
import torch


class HorovodTrainer:
    def __init__(self, **kwargs):
        self.dtype = kwargs.get("dtype", None)

    def train(self, dataloader, module, optimizer):
        module.train()
        progress_bar = self.train_progress_bar(dataloader, module.config.datasets.train)
        outputs = []
        for i, batch in progress_bar:
            optimizer.zero_grad()
            batch = sample_to_cuda(batch)
            output = module.training_step(batch, i)
            output["loss"].backward()
            optimizer.step()
            outputs.append(output)  # leak
            progress_bar.set_description(
                "Epoch {} | Avg.Loss {:.4f}".format(module.current_epoch, self.avg_loss(output["loss"].item()))
            )
        return module.training_epoch_end(outputs)


def sample_to_cuda(data):
    if isinstance(data, dict):
        return {key: sample_to_cuda(data[key]) for key in data.keys()}
    return data.to("cuda")
