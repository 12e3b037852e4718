"""GPU Travelling's Python package.

- gputravel.channel: mutual-TLS channels from the campaign PKI files.
- gputravel.client: the scheduler API (Client), health and reflection.
- gputravel.trainer: the trainer service as an iterable PyTorch consumes.
- gputravel.checkpoints: checkpoints kept by SHA-256, written atomically.
- gputravel.build_stubs: generates gputravel.proto from the repository's
  proto/ (Bazel does it at build time; outside Bazel, run
  `python3 -m gputravel.build_stubs` once).

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf,
python3-grpc-tools; python3-torch for the trainer examples).
"""
