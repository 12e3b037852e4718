"""Starts the real emulated stack (`gputravel demo --serve`: the emulated
GPU, the MUX, holder agents and the orchestrator as separate processes) for
Python tests, and stops it."""

import json
import os
import signal
import subprocess
import tempfile
import time


def gputravel_binary():
    """The C++ CLI from the test's Bazel runfiles (or $GPUTRAVEL_BIN)."""
    if os.environ.get("GPUTRAVEL_BIN"):
        return os.environ["GPUTRAVEL_BIN"]
    root = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if not root:
        raise RuntimeError("run under `bazel test`, or set GPUTRAVEL_BIN to the gputravel CLI")
    return os.path.join(root, "gputravel", "cli", "gputravel")


class ServedStack:
    """Context manager: `info` is the JSON `demo --serve` writes (endpoint,
    scheduler/operator TLS files, spec, dir)."""

    def __init__(self, holders=2, start_seconds=120, extra_args=()):
        self.holders = holders
        self.extra_args = list(extra_args)
        self.start_seconds = start_seconds
        self.info = None
        self._proc = None

    def __enter__(self):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        info_path = os.path.join(tmp, "stack.json")
        self._log = open(os.path.join(tmp, "stack.log"), "w")
        self._proc = subprocess.Popen(
            [gputravel_binary(), "demo", "--serve", info_path, "--holders", str(self.holders)]
            + self.extra_args,
            stdout=self._log, stderr=subprocess.STDOUT)
        # Bounded wait for the stack's readiness file (a failure to start
        # ends the process, which is checked each time round).
        for _ in range(self.start_seconds * 10):
            if os.path.exists(info_path):
                with open(info_path) as f:
                    self.info = json.load(f)
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.1)
        self.__exit__(None, None, None)
        with open(self._log.name) as f:
            raise RuntimeError("the emulated stack did not start:\n" + f.read())

    def __exit__(self, *exc):
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def tls(self, who="scheduler"):
        f = self.info[who]
        return f["ca"], f["cert"], f["key"]

    def pki_file(self, name):
        return os.path.join(self.info["dir"], "pki", "tls", name)
