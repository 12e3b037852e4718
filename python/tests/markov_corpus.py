"""A synthetic llm.c-style token stream for the Python tests, shaped like
trainer/synthetic_corpus.h's (a sparse Markov chain over a 512-token
vocabulary, entropy about 1.5 nats per token): test data only."""

import numpy as np
import torch

VOCAB = 512


def markov_corpus(tokens, seed, vocab=VOCAB):
    """Each token has 4 likely successors (0.50, 0.25, 0.15, 0.06; else
    uniform), fixed for every seed: entropy about 1.5 nats per token."""
    chain = np.random.default_rng(12345).integers(0, vocab, (vocab, 4))
    rng = np.random.default_rng(seed)
    choice = rng.choice(5, size=tokens, p=[0.50, 0.25, 0.15, 0.06, 0.04])
    uniform = rng.integers(0, vocab, tokens)
    out = np.empty(tokens, dtype=np.uint16)
    t = int(rng.integers(0, vocab))
    for i in range(tokens):
        out[i] = t
        t = int(uniform[i]) if choice[i] == 4 else int(chain[t, choice[i]])
    return torch.from_numpy(out.astype(np.int64))
