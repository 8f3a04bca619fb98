# Source: https://github.com/cdtools-developers/cdtools/pull/87
# Reported: "This memory leak had to do with callbacks which closed over stale tensors that would
#   never be released ... The fix is to just check explicitly for new callbacks after each
#   iteration and release them within the model.inspect() code." (Reconstructed from the PR
#   description: the shape of the queue is not in the report.)
# Pattern: closures capturing the current iteration's CUDA tensors are queued in a list attribute
#   that nothing empties.
# Label: the line marked `# leak` keeps the memory.
import torch


class CDIModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.probe = torch.nn.Parameter(torch.ones(256, 256, dtype=torch.complex64, device="cuda"))
        self.plot_callbacks = []

    def inspect(self, dataset):
        probe = self.probe.detach()
        intensity = probe.abs() ** 2
        self.plot_callbacks.append(lambda fig: fig.imshow(intensity.cpu().numpy()))  # leak

    def reconstruct(self, dataset, iterations, optimizer):
        for it in range(iterations):
            for inputs, patterns in dataset:
                optimizer.zero_grad()
                loss = ((self(*inputs) - patterns) ** 2).sum()
                loss.backward()
                optimizer.step()
            self.inspect(dataset)
