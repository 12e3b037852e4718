#!/usr/bin/python3
"""Example trainer: trains the project's small decoder-only transformer
(examples/decoder_lm.py) on a campaign's windows through the orchestrator's
Trainer service (gputravel.trainer.RemoteTrainer).

    python3 python/examples/torch_trainer.py --campaign C --checkpoint_dir DIR \\
        --endpoint unix:/path/trainer.sock --ca CA --cert CERT --key KEY [--device auto]

The certificate is a "trainer" one whose name the campaign's
trainer.identity names. Prints one line per committed window (trip, holder,
tokens, mean loss over its batches, seconds), or JSON lines with --json;
exits 0 when the campaign ends, 1 if the trainer had to stop (the message
says why), 2 on bad usage. Keep --checkpoint_dir across restarts: a
restarted trainer continues from the checkpoint the campaign committed.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from examples.decoder_lm import ModelConfig, Trainer  # noqa: E402
from gputravel import channel  # noqa: E402
from gputravel.checkpoints import CheckpointError  # noqa: E402
from gputravel.trainer import RemoteTrainer, TrainerError  # noqa: E402


def pick_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("torch_trainer: --device %s: this PyTorch sees no CUDA device" % name)
    return name


class WindowPrinter:
    """on_window callback: one line (or JSON object) per committed window."""

    def __init__(self, out, as_json=False):
        self.out, self.as_json = out, as_json
        self.started = time.monotonic()
        self.losses = []  # (trip, mean loss) in commit order

    def __call__(self, w):
        mean = sum(w.batch_loss) / len(w.batch_loss)
        seconds, self.started = time.monotonic() - self.started, time.monotonic()
        self.losses.append((w.trip, mean))
        if self.as_json:
            self.out.write(json.dumps({"trip": w.trip, "holder": w.holder, "tokens": w.tokens,
                                       "loss": mean, "batches": len(w.batch_loss),
                                       "seconds": seconds,
                                       "checkpoint_sha256": w.checkpoint_sha256.hex()}) + "\n")
        else:
            self.out.write("trip %-4d %-10s %9d tokens  loss %.4f  %7.2f s  checkpoint %s\n"
                           % (w.trip, w.holder, w.tokens, mean, seconds,
                              w.checkpoint_sha256.hex()[:16]))
        self.out.flush()


def train(remote, model):
    """The training loop: every batch the campaign delivers, one step each."""
    for batch in remote:
        remote.record_loss(model.train_step(batch.tokens))


def make_remote(model, campaign, checkpoint_dir, **kw):
    """A RemoteTrainer that checkpoints `model` (torch.save of model and
    optimizer state) and syncs its device on lease release."""
    return RemoteTrainer(campaign, checkpoint_dir,
                         save=lambda f: torch.save(model.state(), f),
                         load=lambda f: model.load_state(torch.load(f, map_location=model.device)),
                         sync=model.sync, **kw)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--campaign", required=True)
    p.add_argument("--checkpoint_dir", required=True,
                   help="this trainer's checkpoints (by SHA-256); keep it across restarts")
    p.add_argument("--endpoint", help="the orchestrator's trainer socket (env GPUTRAVEL_ENDPOINT)")
    p.add_argument("--ca", help="campaign CA certificate (env GPUTRAVEL_CA)")
    p.add_argument("--cert", help="your trainer certificate (env GPUTRAVEL_CERT)")
    p.add_argument("--key", help="its private key (env GPUTRAVEL_KEY)")
    p.add_argument("--server_name", default="orchestrator")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads for PyTorch (default: PyTorch's choice)")
    p.add_argument("--seed", type=int, default=0, help="initial weights")
    p.add_argument("--json", action="store_true", help="one JSON object per window")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    model = Trainer(ModelConfig(), device=pick_device(a.device), seed=a.seed)
    endpoint = a.endpoint or os.environ.get(channel.ENV_ENDPOINT, "")
    try:
        remote = make_remote(model, a.campaign, a.checkpoint_dir, endpoint=endpoint,
                             files=channel.TlsFiles.from_env(a.ca, a.cert, a.key),
                             server_name=a.server_name,
                             on_window=WindowPrinter(sys.stdout, a.json))
    except channel.ConfigError as e:
        print("torch_trainer: %s" % e, file=sys.stderr)
        return 2
    try:
        train(remote, model)
    except (TrainerError, CheckpointError) as e:
        print("torch_trainer: %s" % e, file=sys.stderr)
        return 1
    finally:
        remote.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
