"""A local directory of training checkpoints kept by their SHA-256.

A checkpoint is the file's bytes as the trainer stores them; its name is the
lowercase hex SHA-256 of those bytes plus ".ckpt", so the digest a trainer
reports (proto/trainer.proto WindowReport.checkpoint_sha256) names exactly
one file, and a file whose bytes no longer match its name is refused on load.
Writes are atomic: a temporary file in the same directory, fsync, rename,
then fsync of the directory, so a crash leaves either no checkpoint or a
whole one.
"""

import hashlib
import io
import os
import tempfile

_SUFFIX = ".ckpt"
_INITIAL = "initial"


class CheckpointError(RuntimeError):
    """A checkpoint is missing or damaged; the message names the file."""


class CheckpointStore:

    def __init__(self, directory):
        self.directory = os.path.abspath(directory)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)

    def path(self, sha256):
        """The file of checkpoint `sha256` (bytes)."""
        return os.path.join(self.directory, sha256.hex() + _SUFFIX)

    def has(self, sha256):
        return os.path.exists(self.path(sha256))

    def save(self, write):
        """Calls write(fileobj) to write a checkpoint, stores it atomically
        and returns its SHA-256 (bytes)."""
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=_SUFFIX)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "w+b") as f:
                write(f)
                f.flush()
                f.seek(0)
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                os.fsync(f.fileno())
            digest = h.digest()
            os.replace(tmp, self.path(digest))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self._sync_dir()
        return digest

    def load(self, sha256, read):
        """Calls read(fileobj) on checkpoint `sha256` after checking that its
        bytes still hash to that digest."""
        p = self.path(sha256)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise CheckpointError(
                "checkpoint %s is not in %s: the orchestrator resumes from it, so this "
                "trainer cannot continue (restore that file, or use the checkpoint directory "
                "of the trainer that reported it)" % (sha256.hex(), self.directory)) from None
        if hashlib.sha256(data).digest() != sha256:
            raise CheckpointError("checkpoint %s is damaged: its bytes no longer hash to its name"
                                  % p)
        read(io.BytesIO(data))

    def set_initial(self, sha256):
        """Records the checkpoint a campaign starts from (Resume with no
        checkpoint_sha256 means: this one)."""
        tmp = os.path.join(self.directory, ".tmp-" + _INITIAL)
        with open(tmp, "w") as f:
            f.write(sha256.hex() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.directory, _INITIAL))
        self._sync_dir()

    def initial(self):
        """The initial checkpoint's SHA-256, or None if none was recorded."""
        try:
            with open(os.path.join(self.directory, _INITIAL)) as f:
                return bytes.fromhex(f.read().strip())
        except FileNotFoundError:
            return None

    def prune(self, keep):
        """Removes every checkpoint but those in `keep` (SHA-256 bytes) and
        the initial one."""
        names = {k.hex() + _SUFFIX for k in keep if k}
        init = self.initial()
        if init:
            names.add(init.hex() + _SUFFIX)
        for n in os.listdir(self.directory):
            if n.endswith(_SUFFIX) and not n.startswith(".tmp-") and n not in names:
                os.unlink(os.path.join(self.directory, n))

    def _sync_dir(self):
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
