# Shape of pytorch/pytorch:torch/nn/attention/experimental/_paged_attention.py (PagedAttention),
# shortened. Clean: page_table and physical_to_logical are tensors allocated once
# (`-torch.ones(...)`); reserve() writes into them in place.
import torch


class PagedAttention:
    def __init__(self, n_pages, page_size, max_batch_size, device="cuda"):
        self.page_size = page_size
        self.page_table = -torch.ones((max_batch_size, n_pages), dtype=torch.int64, device=device)
        self.capacity = torch.zeros(max_batch_size, dtype=torch.int64, device=device)
        self.empty_pages = list(range(n_pages - 1, -1, -1))
        self.physical_to_logical = -torch.ones((max_batch_size, n_pages), dtype=torch.int64, device=device)

    def reserve(self, batch_idx, seq_len):
        num_pages_to_allocate = (seq_len - self.capacity[batch_idx] + self.page_size - 1) // self.page_size
        start_page_idx = self.capacity[batch_idx] // self.page_size
        end_page_idx = start_page_idx + num_pages_to_allocate
        allocated_pages = torch.tensor(
            self.empty_pages[-num_pages_to_allocate:], device=num_pages_to_allocate.device
        )
        self.empty_pages = self.empty_pages[:-num_pages_to_allocate]
        self.page_table[batch_idx, start_page_idx:end_page_idx] = allocated_pages
        self.physical_to_logical[batch_idx, allocated_pages] = torch.arange(
            start_page_idx.item(), end_page_idx.item(), device=num_pages_to_allocate.device
        )
        self.capacity[batch_idx] += num_pages_to_allocate * self.page_size
