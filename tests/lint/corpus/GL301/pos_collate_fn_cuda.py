import torch
from torch.utils.data import DataLoader


def pad_collate(batch):
    seqs = [torch.tensor(s) for s in batch]
    padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    return padded.to("cuda")  # expect: GL301


loader = DataLoader(dataset, batch_size=16, collate_fn=pad_collate, num_workers=2)
