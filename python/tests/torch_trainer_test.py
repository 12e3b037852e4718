"""examples/torch_trainer.py's loop (the decoder transformer through
gputravel.trainer) against the TEST DOUBLE of the Trainer service
(tests/fake_trainer_service.py): a short campaign of synthetic windows; the
loss per window falls well below ln(vocab), and a trainer restarted
mid-campaign continues from the committed checkpoint."""

import io
import math
import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from examples import torch_trainer  # noqa: E402
from examples.decoder_lm import ModelConfig, Trainer  # noqa: E402
from gputravel.checkpoints import CheckpointStore  # noqa: E402
from tests.markov_corpus import markov_corpus  # noqa: E402
from tests.fake_trainer_service import VOCAB, FakeTrainerService, ServedFake  # noqa: E402

WINDOW_TOKENS = 24 * 1024
BATCH = 512


def windows(n):
    return [(i + 1, "holder-%s" % "abc"[i % 3],
             markov_corpus(WINDOW_TOKENS, seed=100 + i).numpy().astype("uint16"))
            for i in range(n)]


class TorchTrainerTest(unittest.TestCase):

    def setUp(self):
        self.ckpt = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def run_trainer(self, served, out, stop_after_batches=None):
        model = Trainer(ModelConfig(vocab=VOCAB))
        printer = torch_trainer.WindowPrinter(out, as_json=True)
        remote = torch_trainer.make_remote(model, "c", self.ckpt, on_window=printer,
                                           channel_factory=served.channel,
                                           reattach_delay_seconds=0.01)
        if stop_after_batches is None:
            torch_trainer.train(remote, model)
        else:
            for k, batch in enumerate(remote):
                remote.record_loss(model.train_step(batch.tokens))
                if k + 1 == stop_after_batches:
                    break
        remote.close()
        return printer.losses

    def test_loss_per_window_falls_well_below_ln_vocab(self):
        service = FakeTrainerService(windows(4), batch_tokens=BATCH)
        out = io.StringIO()
        with ServedFake(service) as served:
            losses = self.run_trainer(served, out)
        self.assertEqual([t for t, _ in losses], [1, 2, 3, 4])
        self.assertEqual(out.getvalue().count('"trip"'), 4)
        first, last = losses[0][1], losses[-1][1]
        self.assertLess(last, first)
        self.assertLess(last, 0.5 * math.log(VOCAB))
        self.assertEqual([c[2] for c in service.commits], [WINDOW_TOKENS] * 4)

    def test_restart_mid_window_continues_from_the_committed_checkpoint(self):
        ws = windows(3)
        service = FakeTrainerService(ws, batch_tokens=BATCH)
        per_window = -(-(WINDOW_TOKENS - 1) // BATCH)
        store = CheckpointStore(self.ckpt)
        with ServedFake(service) as served:
            # Killed 5 batches into trip 2 (trip 1 committed).
            first = self.run_trainer(served, io.StringIO(), stop_after_batches=per_window + 5)
            self.assertEqual([t for t, _ in first], [1])
            trip1 = []
            store.load(service.committed_sha, lambda f: trip1.append(f.read()))
            second = self.run_trainer(served, io.StringIO())
        self.assertEqual([t for t, _ in second], [2, 3])
        self.assertEqual([c[0] for c in service.commits], [1, 2, 3])
        # The committed model is trip 1's checkpoint trained on windows 2
        # and 3 once each (the 5 batches of the killed run are not in it):
        # replaying exactly that gives the same weights.
        replay = Trainer(ModelConfig(vocab=VOCAB))
        replay.load_state(torch.load(io.BytesIO(trip1[0])))
        for _, _, w in ws[1:]:
            for _, _, _, part in service._batches(w):
                replay.train_step(torch.from_numpy(part.astype("int64")))
        final = []
        store.load(service.committed_sha, lambda f: final.append(torch.load(f)))
        for name, tensor in replay.state()["model"].items():
            self.assertTrue(torch.equal(tensor, final[0]["model"][name]), name)


if __name__ == "__main__":
    unittest.main()
