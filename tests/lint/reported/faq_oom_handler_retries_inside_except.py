# Source: https://pytorch.org/docs/stable/notes/faq.html ("My out of memory exception handler
#   can't allocate memory")
# Reported: "the exception's traceback keeps the frames of the failed call (and their tensors)
#   alive while the handler runs ... move the recovery code outside of the except clause".
# Pattern: the retry runs inside the except block, where the exception still references the
#   frames of the attempt that ran out of memory.
# Label: the line marked `# leak` keeps the memory.
import torch


def run_model(batch_size):
    x = torch.randn(batch_size, 3, 224, 224, device="cuda")
    return model(x).sum().backward()


def train_step(batch_size):
    try:
        run_model(batch_size)
    except RuntimeError:  # Out of memory
        for _ in range(batch_size):
            run_model(1)  # leak
