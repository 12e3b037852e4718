"""TEST DOUBLE of the orchestrator's side of proto/trainer.proto, for the
Python trainer's tests (no production code uses it): an in-process gRPC
server over an insecure Unix socket in a temporary directory."""

import os
import shutil
import tempfile
import threading
import time
from concurrent import futures

import grpc

from gputravel.proto import trainer_pb2 as pb
from gputravel.proto import trainer_pb2_grpc as pb_grpc

VOCAB = 512
BATCH_TOKENS = 8
WAIT_BOUND_SECONDS = 60


class FakeTrainerService(pb_grpc.TrainerServicer):
    """TEST DOUBLE of the orchestrator's side of proto/trainer.proto: one
    campaign of fixed windows; commits reports in memory. Faults:
    break_after[(attach_no, trip)] = k: the stream fails UNAVAILABLE after
    batch k of that trip on that attach; lose_answer_for: trips whose first
    report is committed but answered UNAVAILABLE."""

    def __init__(self, windows, batch_tokens=BATCH_TOKENS):
        self.windows = windows  # [(trip, holder, np.uint16 array)]
        self.batch_tokens = batch_tokens
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
        starts = list(range(0, n - 1, self.batch_tokens))
        for k, s in enumerate(starts):
            yield k, len(starts), s, tokens[s:min(s + self.batch_tokens + 1, n)]

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
                               batch_tokens=self.batch_tokens, vocab=VOCAB)
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


class ServedFake:
    """Context manager: a FakeTrainerService served on a Unix socket;
    `channel()` makes a client channel to it."""

    def __init__(self, service):
        self.service = service

    def __enter__(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_TrainerServicer_to_server(self.service, self.server)
        # A short directory: Unix socket paths are limited to 107 bytes.
        self.sock_dir = tempfile.mkdtemp(prefix="gt-py-", dir="/tmp")
        self.address = "unix:" + os.path.join(self.sock_dir, "trainer.sock")
        self.server.add_insecure_port(self.address)
        self.server.start()
        return self

    def channel(self):
        return grpc.insecure_channel(self.address)

    def __exit__(self, *exc):
        self.server.stop(None)
        shutil.rmtree(self.sock_dir, ignore_errors=True)
