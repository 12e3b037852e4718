"""The trainer service (proto/trainer.proto) as an iterable a PyTorch
training loop consumes directly.

    trainer = RemoteTrainer("my-campaign", "ckpt/",
                            save=lambda f: torch.save(state(), f),
                            load=lambda f: restore(torch.load(f)),
                            endpoint="unix:/run/gputravel/trainer.sock",
                            files=TlsFiles(ca, cert, key))      # role "trainer"
    for batch in trainer:                 # blocks while the GPU travels
        loss = train_step(batch.tokens)   # int64 tensor of llm.c tokens
        trainer.record_loss(loss.item())

What it does for the loop:
- Resume: the first message of every Attach names the checkpoint the
  campaign continues from; the trainer loads it (load(fileobj)) from its
  checkpoint directory (gputravel.checkpoints: files named by SHA-256)
  unless the model is already exactly that one. With no checkpoint yet it
  saves the model as it is as the campaign's initial checkpoint (or loads
  the one saved before, after a restart), so every restart begins from the
  same weights.
- Batches in window order, as TrainerBatch (trip, tokens, holder, ...).
- After the loop has trained a window's last batch (when it asks for the
  next one): saves a checkpoint atomically (save(fileobj); write, fsync,
  rename), then reports the window (ReportWindow: the per-batch losses, its
  tokens, the checkpoint's SHA-256). Only after the orchestrator committed
  it does the next window come.
- Lease: on a release, calls sync() (e.g. torch.cuda.synchronize: the
  device work is finished) and answers ReleaseLease.
- A broken stream or an unanswered report (UNAVAILABLE, the orchestrator
  restarting): re-attaches, and the new Resume decides: a window that was
  committed is not trained again; one that was not is delivered again and
  the model goes back to the committed checkpoint first, so no window is
  trained twice into the model the campaign continues from.

The loop must call record_loss once per batch. The checkpoint directory is
the trainer's own (one per campaign): keep it across restarts.
"""

import dataclasses
import time

import grpc
import numpy as np
import torch

from gputravel import channel as channel_mod
from gputravel.checkpoints import CheckpointStore
from gputravel.proto import trainer_pb2 as pb
from gputravel.proto import trainer_pb2_grpc as pb_grpc

# Codes after which the trainer attaches again: the connection broke, or the
# orchestrator restarted (CANCELLED at its shutdown).
_REATTACH = frozenset([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                       grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED])
# A report the orchestrator refused: the window comes again on the next Attach.
_REDELIVER = frozenset([grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT])
# Attach refused while the orchestrator still holds this trainer's previous
# stream (it has not yet seen it break): wait and attach again.
_STILL_ATTACHED = "already has an attached trainer"


class _Redeliver(Exception):
    """A report refused with _REDELIVER: attach again."""


class TrainerError(RuntimeError):
    """The trainer cannot go on (the message says why and what to do)."""


@dataclasses.dataclass
class TrainerBatch:
    trip: int
    holder: str
    # llm.c tokens as int64 (what nn.Embedding takes), shape [n]: the batch's
    # B tokens plus the overlap token (the last batch of a window: the rest).
    tokens: torch.Tensor
    index: int
    batches_in_window: int
    last_of_window: bool
    offset_in_window: int


@dataclasses.dataclass
class WindowReported:
    """One committed window, as the trainer reported it."""
    trip: int
    holder: str
    tokens: int
    batch_loss: list
    checkpoint_sha256: bytes
    tokens_committed: int


class _Window:
    def __init__(self, trip, holder, batches):
        self.trip, self.holder, self.batches = trip, holder, batches
        self.handed = 0
        self.token_count = 0
        self.losses = []


class RemoteTrainer:
    """Attaches to `campaign` and hands its batches to the loop.

    save(fileobj) / load(fileobj): write / restore the whole training state
    (weights and optimizer). sync(): wait for the device's queued work.
    on_window(WindowReported): called after each window is committed.
    channel_factory: a callable returning the gRPC channel (default: mTLS to
    `endpoint` with `files`, accepting only orchestrator/`server_name`).
    """

    def __init__(self, campaign, checkpoint_dir, save, load, endpoint=None, files=None,
                 server_name="orchestrator", sync=None, channel_factory=None,
                 reattach_attempts=30, reattach_delay_seconds=1.0, timeout=30.0,
                 on_window=None):
        self.campaign = campaign
        self.store = CheckpointStore(checkpoint_dir)
        self._save, self._load = save, load
        self._sync = sync or (lambda: None)
        self._on_window = on_window or (lambda reported: None)
        if channel_factory is None:
            files = files or channel_mod.TlsFiles.from_env()
            channel_factory = lambda: channel_mod.secure_channel(  # noqa: E731
                endpoint, files, "orchestrator", server_name)
        self._channel = channel_factory()
        self._stub = pb_grpc.TrainerStub(self._channel)
        self._attempts, self._delay, self._timeout = (reattach_attempts, reattach_delay_seconds,
                                                      timeout)
        # The checkpoint the in-memory model is exactly (None once it trained).
        self._model_sha = None
        self._window = None
        self.resume = None          # the latest Resume
        self.holds_lease = False
        self.lease_id = 0
        self.reported = []          # WindowReported, in order
        self.attaches = 0
        self.leases_released = 0

    def close(self):
        self._channel.close()

    def __iter__(self):
        failures = 0
        while True:
            self.attaches += 1
            self._window = None
            self.holds_lease = False  # a new stream grants its own lease
            stream = self._stub.Attach(pb.AttachRequest(campaign=self.campaign))
            try:
                for msg in stream:
                    kind = msg.WhichOneof("message")
                    if kind == "resume":
                        self._on_resume(msg.resume)
                    elif kind == "lease":
                        self._on_lease(msg.lease)
                    elif kind == "batch":
                        b = self._on_batch(msg.batch)
                        self._model_sha = None
                        yield b
                        if b.last_of_window:
                            self._finish_window()
                            failures = 0  # progress: count failures afresh
                return  # the campaign reached a final state
            except (grpc.RpcError, _Redeliver) as e:
                if isinstance(e, _Redeliver):
                    e = e.args[0]
                    retry = True
                else:
                    retry = e.code() in _REATTACH or (
                        e.code() == grpc.StatusCode.FAILED_PRECONDITION
                        and _STILL_ATTACHED in (e.details() or ""))
                code = e.code()
                if not retry:
                    raise TrainerError("campaign %s: the orchestrator ended the trainer's stream: "
                                       "%s: %s" % (self.campaign, code.name, e.details())) from None
                failures += 1
                if failures > self._attempts:
                    raise TrainerError("campaign %s: gave up after %d attempts to attach: %s: %s"
                                       % (self.campaign, self._attempts, code.name,
                                          e.details())) from None
                time.sleep(self._delay)
            finally:
                stream.cancel()

    def record_loss(self, loss):
        """The loss (mean nats over the batch's token pairs) of the batch
        just trained."""
        w = self._window
        if w is None or len(w.losses) >= w.handed:
            raise TrainerError("record_loss: no batch is waiting for its loss (call it once per "
                               "batch, after training it)")
        w.losses.append(float(loss))

    def _on_resume(self, r):
        self.resume = r
        target = bytes(r.checkpoint_sha256)
        if not target:
            target = self.store.initial()
            if target is None:
                # A campaign with nothing committed, met for the first time:
                # the model as it is now is where the campaign starts.
                target = self.store.save(self._save)
                self.store.set_initial(target)
                self._model_sha = target
        if target != self._model_sha:
            self.store.load(target, self._load)
            self._model_sha = target

    def _on_lease(self, lease):
        if not lease.release:
            self.holds_lease, self.lease_id = True, lease.lease_id
            return
        self._sync()
        self._stub.ReleaseLease(pb.LeaseReleased(campaign=self.campaign, lease_id=lease.lease_id),
                                timeout=self._timeout)
        self.holds_lease = False
        self.leases_released += 1

    def _on_batch(self, b):
        if self.resume is None:
            raise TrainerError("campaign %s: a batch came before the Resume" % self.campaign)
        w = self._window
        if w is None or w.trip != b.trip:
            if w is not None:
                raise TrainerError("campaign %s: trip %d began before trip %d's last batch"
                                   % (self.campaign, b.trip, w.trip))
            if b.index != 0 or b.trip <= self.resume.committed_trip:
                raise TrainerError("campaign %s: trip %d began with batch %d (committed up to "
                                   "trip %d)" % (self.campaign, b.trip, b.index,
                                                 self.resume.committed_trip))
            w = self._window = _Window(b.trip, b.holder, b.batches_in_window)
        if b.index != w.handed or b.batches_in_window != w.batches:
            raise TrainerError("campaign %s: trip %d: batch %d of %d came after batch %d of %d"
                               % (self.campaign, b.trip, b.index, b.batches_in_window,
                                  w.handed - 1, w.batches))
        if len(b.tokens) % 2:
            raise TrainerError("campaign %s: trip %d batch %d has an odd byte count (%d)"
                               % (self.campaign, b.trip, b.index, len(b.tokens)))
        tokens = np.frombuffer(b.tokens, dtype="<u2").astype(np.int64)
        w.handed += 1
        w.token_count += len(tokens)
        return TrainerBatch(trip=b.trip, holder=b.holder, tokens=torch.from_numpy(tokens),
                            index=b.index, batches_in_window=b.batches_in_window,
                            last_of_window=b.last_of_window, offset_in_window=b.offset_in_window)

    def _finish_window(self):
        w = self._window
        if len(w.losses) != w.handed:
            raise TrainerError("campaign %s: trip %d: record_loss was called %d times for %d "
                               "batches (once per batch)" % (self.campaign, w.trip,
                                                             len(w.losses), w.handed))
        sha = self.store.save(self._save)
        self._model_sha = sha
        # Batches overlap by one token: count each token of the window once.
        tokens = w.token_count - (w.handed - 1)
        report = pb.WindowReport(campaign=self.campaign, trip=w.trip, batch_loss=w.losses,
                                 tokens=tokens, checkpoint_sha256=sha)
        try:
            r = self._stub.ReportWindow(report, timeout=self._timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.ALREADY_EXISTS:
                raise TrainerError(
                    "campaign %s: trip %d was committed with another checkpoint (%s): another "
                    "trainer trained this campaign; use its checkpoint directory"
                    % (self.campaign, w.trip, e.details())) from None
            if e.code() in _REDELIVER:
                raise _Redeliver(e) from None
            raise
        self._window = None
        self.reported.append(WindowReported(w.trip, w.holder, tokens, list(w.losses), sha,
                                            r.tokens_committed))
        self.store.prune(keep=[sha])
        self._on_window(self.reported[-1])
