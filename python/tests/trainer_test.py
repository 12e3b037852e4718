"""gputravel.trainer.RemoteTrainer against an in-process TEST DOUBLE of the
orchestrator's Trainer service (FakeTrainerService below: it implements
proto/trainer.proto's contract over an insecure Unix socket, nothing more).
The end-to-end test against the real orchestrator is a separate target."""

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gputravel.checkpoints import CheckpointError, CheckpointStore  # noqa: E402
from gputravel.proto import trainer_pb2 as pb  # noqa: E402
from gputravel.proto import trainer_pb2_grpc as pb_grpc  # noqa: E402
from gputravel.trainer import RemoteTrainer, TrainerError  # noqa: E402

VOCAB = 512
BATCH_TOKENS = 8
WAIT_BOUND_SECONDS = 60


class FakeTrainerService(pb_grpc.TrainerServicer):
    """TEST DOUBLE of the orchestrator's side of proto/trainer.proto: one
    campaign of fixed windows; commits reports in memory. Faults:
    break_after[(attach_no, trip)] = k: the stream fails UNAVAILABLE after
    batch k of that trip on that attach; lose_answer_for: trips whose first
    report is committed but answered UNAVAILABLE."""

    def __init__(self, windows):
        self.windows = windows  # [(trip, holder, np.uint16 array)]
        self.cv = threading.Condition()
        self.committed_trip, self.committed_sha, self.tokens_committed = 0, b"", 0
        self.commits = []       # (trip, sha, tokens, losses)
        self.released = set()
        self.lease_id = 0
        self.attach_no = 0
        self.break_after = {}
        self.lose_answer_for = set()
        self.batches_sent_without_lease = 0

    def _batches(self, tokens):
        n = len(tokens)
        starts = list(range(0, n - 1, BATCH_TOKENS))
        for k, s in enumerate(starts):
            yield k, len(starts), s, tokens[s:min(s + BATCH_TOKENS + 1, n)]

    def _wait(self, pred, context):
        deadline = time.monotonic() + WAIT_BOUND_SECONDS
        with self.cv:
            while not pred():
                if not context.is_active() or time.monotonic() > deadline:
                    return False
                self.cv.wait(0.05)
        return True

    def Attach(self, request, context):
        with self.cv:
            self.attach_no += 1
            attach_no = self.attach_no
            resume = pb.Resume(committed_trip=self.committed_trip,
                               checkpoint_sha256=self.committed_sha,
                               tokens_committed=self.tokens_committed,
                               batch_tokens=BATCH_TOKENS, vocab=VOCAB)
        yield pb.TrainerMessage(resume=resume)
        for trip, holder, tokens in self.windows:
            if trip <= resume.committed_trip:
                continue
            with self.cv:
                self.lease_id += 1
                lease = self.lease_id
            yield pb.TrainerMessage(lease=pb.Lease(release=False, lease_id=lease))
            for k, count, start, part in self._batches(tokens):
                yield pb.TrainerMessage(batch=pb.Batch(
                    trip=trip, holder=holder, offset_in_window=2 * start,
                    tokens=part.astype("<u2").tobytes(), last_of_window=(k == count - 1),
                    index=k, batches_in_window=count))
                if self.break_after.get((attach_no, trip)) == k:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "test double: stream broken")
            if not self._wait(lambda: self.committed_trip >= trip, context):
                return
            yield pb.TrainerMessage(lease=pb.Lease(release=True, lease_id=lease,
                                                   timeout_seconds=10))
            if not self._wait(lambda: lease in self.released, context):
                return

    def ReportWindow(self, request, context):
        with self.cv:
            if request.trip == self.committed_trip and request.checkpoint_sha256:
                if request.checkpoint_sha256 == self.committed_sha:
                    return pb.WindowCommitted(trip=request.trip,
                                              tokens_committed=self.tokens_committed)
                context.abort(grpc.StatusCode.ALREADY_EXISTS, "committed with another checkpoint")
            expected = next(t for t, _, _ in self.windows if t > self.committed_trip)
            if request.trip != expected:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "expected trip %d" % expected)
            tokens = dict((t, w) for t, _, w in self.windows)[request.trip]
            batches = sum(1 for _ in self._batches(tokens))
            if len(request.batch_loss) != batches or request.tokens != len(tokens):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "does not match the window")
            self.committed_trip = request.trip
            self.committed_sha = request.checkpoint_sha256
            self.tokens_committed += request.tokens
            self.commits.append((request.trip, request.checkpoint_sha256, request.tokens,
                                 list(request.batch_loss)))
            self.cv.notify_all()
            if request.trip in self.lose_answer_for:
                self.lose_answer_for.discard(request.trip)
                context.abort(grpc.StatusCode.UNAVAILABLE, "test double: answer lost")
            return pb.WindowCommitted(trip=request.trip, tokens_committed=self.tokens_committed)

    def ReleaseLease(self, request, context):
        with self.cv:
            self.released.add(request.lease_id)
            self.cv.notify_all()
        return pb.LeaseReleasedAck()


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
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_TrainerServicer_to_server(self.service, self.server)
        # A short directory: Unix socket paths are limited to 107 bytes.
        self.sock_dir = tempfile.mkdtemp(prefix="gt-py-", dir="/tmp")
        self.address = "unix:" + os.path.join(self.sock_dir, "trainer.sock")
        self.server.add_insecure_port(self.address)
        self.server.start()
        self.ckpt = os.path.join(self.tmp, "ckpt")

    def tearDown(self):
        self.server.stop(None)
        shutil.rmtree(self.sock_dir, ignore_errors=True)

    def trainer(self, model, syncs=None, **kw):
        return RemoteTrainer(
            "c", self.ckpt, save=model.save, load=model.load,
            channel_factory=lambda: grpc.insecure_channel(self.address),
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
                          channel_factory=lambda: grpc.insecure_channel(self.address))
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
        import hashlib
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
