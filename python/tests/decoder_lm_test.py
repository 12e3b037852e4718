"""The example trainer's model on its own: it learns a synthetic llm.c-style
corpus (tests/markov_corpus.py) well below the untrained loss ln(vocab)."""

import io
import math
import os
import sys
import time
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from examples.decoder_lm import ModelConfig, Trainer, batch_to_sequences  # noqa: E402
from tests.markov_corpus import VOCAB, markov_corpus  # noqa: E402


class DecoderLMTest(unittest.TestCase):

    def test_untrained_loss_is_about_ln_vocab(self):
        t = Trainer(ModelConfig(vocab=VOCAB))
        self.assertAlmostEqual(t.loss(markov_corpus(4097, 1)), math.log(VOCAB), delta=0.1)

    def test_learns_the_corpus_well_below_ln_vocab(self):
        t = Trainer(ModelConfig(vocab=VOCAB))
        corpus = markov_corpus(300 * 512 + 1, seed=2)
        held_out = markov_corpus(8193, seed=3)
        start = time.monotonic()
        steps = 300
        for k in range(steps):  # batches of 512 pairs, as a window slice
            t.train_step(corpus[k * 512:(k + 1) * 512 + 1])
        seconds = time.monotonic() - start
        loss = t.loss(held_out)
        print("decoder_lm: %d steps of 512 tokens in %.1f s (%.0f tokens/s); held-out loss "
              "%.3f vs ln(%d) = %.3f" % (steps, seconds, steps * 512 / seconds, loss, VOCAB,
                                         math.log(VOCAB)))
        self.assertLess(loss, 0.5 * math.log(VOCAB))

    def test_checkpoint_round_trip_continues_identically(self):
        corpus = markov_corpus(20 * 257, seed=4)
        a = Trainer(ModelConfig(vocab=VOCAB), seed=1)
        for k in range(5):
            a.train_step(corpus[k * 256:(k + 1) * 256 + 1])
        buf = io.BytesIO()
        torch.save(a.state(), buf)
        b = Trainer(ModelConfig(vocab=VOCAB), seed=99)
        buf.seek(0)
        b.load_state(torch.load(buf))
        batch = corpus[5 * 256:6 * 256 + 1]
        self.assertEqual(a.train_step(batch), b.train_step(batch))
        self.assertEqual(a.loss(batch), b.loss(batch))

    def test_batch_pairs_are_all_kept_and_padding_ignored(self):
        tokens = torch.arange(10) + VOCAB  # modelled modulo vocab
        x, y = batch_to_sequences(tokens, 4, VOCAB)
        self.assertEqual(x.shape, (3, 4))
        self.assertEqual(int((y != -100).sum()), 9)
        self.assertEqual(x.flatten()[:9].tolist(), list(range(9)))
        self.assertEqual(y.flatten()[:9].tolist(), list(range(1, 10)))


if __name__ == "__main__":
    unittest.main()
