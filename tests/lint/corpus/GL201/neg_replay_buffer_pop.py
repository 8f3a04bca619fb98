import torch


class ReplayBuffer:
    def __init__(self, capacity):
        self.capacity = capacity
        self.storage = []

    def push(self, state):
        self.storage.append(state.to("cuda"))
        if len(self.storage) > self.capacity:
            self.storage.pop(0)
