# A method cache of a class that holds no model (a tokenizer's vocabulary lookups).
from functools import lru_cache


class Tokenizer:
    def __init__(self, vocab):
        self.vocab = vocab

    @lru_cache(maxsize=None)
    def token_id(self, token):
        return self.vocab.get(token, 0)
