import torch


def validate(encoder, loader):
    embeddings = []
    for batch in loader:
        embeddings += [encoder(batch)]  # expect: GL102
    return embeddings
