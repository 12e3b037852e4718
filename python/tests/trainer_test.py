"""gputravel.trainer.RemoteTrainer against an in-process TEST DOUBLE of the
orchestrator's Trainer service (tests/fake_trainer_service.py: it implements
proto/trainer.proto's contract over an insecure Unix socket, nothing more),
and gputravel.checkpoints."""

import hashlib
import json
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gputravel.checkpoints import CheckpointError, CheckpointStore  # noqa: E402
from gputravel.trainer import RemoteTrainer, TrainerError  # noqa: E402
from tests.fake_trainer_service import VOCAB, FakeTrainerService, ServedFake  # noqa: E402

class CountingModel:
    """A 'model' whose state is how many token pairs of each trip it trained:
    training a window twice, or half a window into a checkpoint, shows."""

    def __init__(self):
        self.pairs = {}

    def train(self, batch):
        self.pairs[str(batch.trip)] = self.pairs.get(str(batch.trip), 0) + len(batch.tokens) - 1
        return 1.0 / (1 + len(self.pairs))

    def save(self, f):
        f.write(json.dumps(self.pairs, sort_keys=True).encode())

    def load(self, f):
        self.pairs = json.loads(f.read().decode())


def make_windows(sizes, seed=7):
    rng = np.random.default_rng(seed)
    return [(i + 1, "holder-%s" % "ab"[i % 2], rng.integers(0, VOCAB, n).astype(np.uint16))
            for i, n in enumerate(sizes)]


class RemoteTrainerTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.windows = make_windows([41, 8, 2, 30])
        self.service = FakeTrainerService(self.windows)
        self.served = ServedFake(self.service).__enter__()
        self.ckpt = os.path.join(self.tmp, "ckpt")

    def tearDown(self):
        self.served.__exit__(None, None, None)

    def trainer(self, model, syncs=None, **kw):
        return RemoteTrainer(
            "c", self.ckpt, save=model.save, load=model.load,
            channel_factory=self.served.channel,
            sync=(lambda: syncs.append(1)) if syncs is not None else None,
            reattach_delay_seconds=0.01, **kw)

    def run_loop(self, trainer, model, stop_after=None):
        seen = []
        for b in trainer:
            self.assertTrue(trainer.holds_lease, "a batch came while the lease was not held")
            seen.append((b.trip, b.index, len(b.tokens)))
            trainer.record_loss(model.train(b))
            if stop_after is not None and len(seen) == stop_after:
                break
        return seen

    def expected_pairs(self):
        return {str(t): len(w) - 1 for t, _, w in self.windows}

    def test_trains_every_window_once_in_order_and_reports_each(self):
        model, syncs = CountingModel(), []
        t = self.trainer(model, syncs)
        seen = self.run_loop(t, model)
        self.assertEqual([s[0] for s in seen], sorted(s[0] for s in seen))
        self.assertEqual(model.pairs, self.expected_pairs())
        self.assertEqual([(c[0], c[2]) for c in self.service.commits],
                         [(tr, len(w)) for tr, _, w in self.windows])
        # One loss per batch; each reported checkpoint is in the store and
        # is the model as it stood after its window.
        for (trip, sha, _, losses), rep in zip(self.service.commits, t.reported):
            self.assertEqual(losses, rep.batch_loss)
            self.assertEqual(sha, rep.checkpoint_sha256)
        final = CountingModel()
        t.store.load(self.service.committed_sha, final.load)
        self.assertEqual(final.pairs, self.expected_pairs())
        # Every lease released, after syncing the device work.
        self.assertEqual(t.leases_released, len(self.windows))
        self.assertEqual(len(syncs), len(self.windows))
        self.assertEqual(self.service.released, set(range(1, len(self.windows) + 1)))

    def test_broken_stream_mid_window_reattaches_and_rolls_back(self):
        self.service.break_after[(1, 1)] = 2    # trip 1, after its third batch
        self.service.break_after[(2, 4)] = 0    # trip 4, after its first batch
        model = CountingModel()
        t = self.trainer(model)
        self.run_loop(t, model)
        self.assertEqual(t.attaches, 3)
        self.assertEqual(model.pairs, self.expected_pairs())
        self.assertEqual([c[0] for c in self.service.commits], [1, 2, 3, 4])

    def test_lost_report_answer_is_not_trained_again(self):
        self.service.lose_answer_for = {2}
        model = CountingModel()
        t = self.trainer(model)
        seen = self.run_loop(t, model)
        self.assertEqual(t.attaches, 2)
        self.assertEqual([c[0] for c in self.service.commits], [1, 2, 3, 4])
        self.assertEqual(sum(1 for s in seen if s[0] == 2), 1)
        self.assertEqual(model.pairs, self.expected_pairs())

    def test_restarted_trainer_resumes_from_its_checkpoint(self):
        first = CountingModel()
        t1 = self.trainer(first)
        # Killed mid-way through trip 3's... trip 1 done, trip 2 done, then
        # nothing reported of trip 4: break out during trip 4.
        self.run_loop(t1, first, stop_after=sum(1 for _ in self.service._batches(
            self.windows[0][2])) + 1 + 1 + 2)
        t1.close()
        committed = [c[0] for c in self.service.commits]
        self.assertEqual(committed, [1, 2, 3])
        # A new process: a fresh model, the same checkpoint directory.
        second = CountingModel()
        t2 = self.trainer(second)
        self.run_loop(t2, second)
        self.assertEqual(second.pairs, self.expected_pairs())
        self.assertEqual([c[0] for c in self.service.commits], [1, 2, 3, 4])

    def test_restart_before_any_commit_starts_from_the_same_initial_model(self):
        first = CountingModel()
        first.pairs = {"init": 1}
        t1 = self.trainer(first)
        self.run_loop(t1, first, stop_after=2)
        t1.close()
        second = CountingModel()   # other "random" weights
        t2 = self.trainer(second)
        self.run_loop(t2, second)
        expect = dict(self.expected_pairs(), init=1)
        self.assertEqual(second.pairs, expect)

    def test_missing_checkpoint_refuses_to_train(self):
        model = CountingModel()
        self.run_loop(self.trainer(model), model, stop_after=7)
        other_dir_model = CountingModel()
        t = RemoteTrainer("c", os.path.join(self.tmp, "elsewhere"), save=other_dir_model.save,
                          load=other_dir_model.load,
                          channel_factory=self.served.channel)
        with self.assertRaises(CheckpointError) as e:
            self.run_loop(t, other_dir_model)
        self.assertIn("is not in", str(e.exception))
        self.assertEqual(other_dir_model.pairs, {})

    def test_missing_loss_is_refused_before_reporting(self):
        model = CountingModel()
        t = self.trainer(model)
        with self.assertRaises(TrainerError) as e:
            for b in t:
                if b.index > 0:
                    t.record_loss(model.train(b))
        self.assertIn("record_loss was called", str(e.exception))
        self.assertEqual(self.service.commits, [])


class CheckpointStoreTest(unittest.TestCase):

    def test_named_by_digest_and_damage_refused(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        s = CheckpointStore(d)
        sha = s.save(lambda f: f.write(b"weights"))
        self.assertEqual(sha, hashlib.sha256(b"weights").digest())
        self.assertEqual(os.listdir(d), [sha.hex() + ".ckpt"])
        got = []
        s.load(sha, lambda f: got.append(f.read()))
        self.assertEqual(got, [b"weights"])
        with open(s.path(sha), "wb") as f:
            f.write(b"tampered")
        with self.assertRaises(CheckpointError):
            s.load(sha, lambda f: None)

    def test_prune_keeps_initial_and_named(self):
        s = CheckpointStore(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")))
        a = s.save(lambda f: f.write(b"a"))
        s.set_initial(a)
        b = s.save(lambda f: f.write(b"b"))
        c = s.save(lambda f: f.write(b"c"))
        s.prune(keep=[c])
        self.assertTrue(s.has(a) and s.has(c))
        self.assertFalse(s.has(b))
        self.assertEqual(s.initial(), a)


if __name__ == "__main__":
    unittest.main()
