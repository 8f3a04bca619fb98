# Source: https://github.com/KevinMusgrave/pytorch-metric-learning/issues/421 (losses/cross_batch_memory.py)
# Reported: "I don't think there is a memory leak in CrossBatchMemory, because it has a fixed size
#   memory, and the input tensors are always detached before being added to memory."
# Label: clean. The queue is a preallocated tensor written in place at a rotating index.
import torch


class CrossBatchMemory(torch.nn.Module):
    def __init__(self, loss, embedding_size, memory_size=1024):
        super().__init__()
        self.loss = loss
        self.embedding_size = embedding_size
        self.memory_size = memory_size
        self.embedding_memory = torch.zeros(self.memory_size, self.embedding_size)
        self.label_memory = torch.zeros(self.memory_size).long()
        self.has_been_filled = False
        self.queue_idx = 0

    def forward(self, embeddings, labels):
        device = embeddings.device
        self.embedding_memory = self.embedding_memory.to(device)
        self.label_memory = self.label_memory.to(device)
        batch_size = len(embeddings)
        self.add_to_memory(embeddings, labels, batch_size)
        E_mem = self.embedding_memory if self.has_been_filled else self.embedding_memory[: self.queue_idx]
        L_mem = self.label_memory if self.has_been_filled else self.label_memory[: self.queue_idx]
        return self.loss(embeddings, labels, ref_emb=E_mem, ref_labels=L_mem)

    def add_to_memory(self, embeddings, labels, batch_size):
        end = self.queue_idx + batch_size
        indices = torch.arange(self.queue_idx, end, device=labels.device) % self.memory_size
        self.embedding_memory[indices] = embeddings.detach()
        self.label_memory[indices] = labels.detach()
        prev_queue_idx = self.queue_idx
        self.queue_idx = (self.queue_idx + batch_size) % self.memory_size
        if (not self.has_been_filled) and (self.queue_idx <= prev_queue_idx):
            self.has_been_filled = True
