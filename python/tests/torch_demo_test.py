"""The example PyTorch trainer against the real orchestrator's Trainer
service: `gputravel demo --trainer torch` completes with every trip verified
and a loss that falls well below an untrained model's, and ends at once
with the trainer's output when the trainer cannot start; a trainer killed
mid-campaign (SIGKILL) and started again resumes from the committed
checkpoint, and every window is trained into the model exactly once."""

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gputravel import channel  # noqa: E402
from gputravel.client import Client  # noqa: E402
from gputravel.proto import orchestrator_pb2 as pb  # noqa: E402
from tests.served_stack import ServedStack, gputravel_binary  # noqa: E402

UNTRAINED = math.log(512)  # the example model's vocabulary


def torch_trainer_program():
    return os.path.join(os.path.dirname(gputravel_binary()), "..", "python", "torch_trainer")


class TorchDemoTest(unittest.TestCase):
    def test_demo_trains_the_torch_model_and_every_trip_verifies(self):
        out = subprocess.run([gputravel_binary(), "demo", "--trainer", "torch", "--json"],
                             capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        report = json.loads(out.stdout)
        self.assertTrue(report["ok"], report)
        self.assertEqual(report["trainer"], "torch")
        self.assertEqual(report["state"], "COMPLETED")
        losses = [t["loss"] for t in report["trips"]]
        self.assertEqual(len(losses), 3, report)  # one window per holder, one loss each
        self.assertTrue(report["loss_falling"], losses)
        self.assertLess(losses[-1], 0.75 * UNTRAINED, losses)


    def test_a_trainer_that_cannot_start_cancels_the_demo_at_once_with_its_output(self):
        env = dict(os.environ, PYTHONHOME="/nonexistent")  # the trainer's python3 fails
        started = time.monotonic()
        out = subprocess.run([gputravel_binary(), "demo", "--trainer", "torch", "--json"],
                             capture_output=True, text=True, timeout=600, env=env)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("the PyTorch trainer exited with status 1 before the campaign ended",
                      out.stderr)
        self.assertIn("PYTHONHOME", out.stderr)  # its own output, shown
        self.assertEqual(json.loads(out.stdout)["state"], "CANCELLED")
        # Not after trainer.timeout_seconds (600 s) of waiting for it.
        self.assertLess(time.monotonic() - started, 300)


class TorchTrainerCrashTest(unittest.TestCase):
    def test_a_trainer_killed_mid_campaign_resumes_and_trains_each_window_once(self):
        work = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        with ServedStack(holders=3, extra_args=["--trainer", "torch"]) as stack:
            info = stack.info
            t = info["trainer"]
            sched = info["scheduler"]
            client = Client(info["endpoint"],
                            channel.TlsFiles(sched["ca"], sched["cert"], sched["key"]),
                            server_name=info["server_name"])
            spec = info["spec"]
            campaign, _ = client.create(json.dumps(spec), request_id="torch-crash")
            client.start(campaign.name)
            args = [torch_trainer_program(), "--campaign", campaign.name,
                    "--checkpoint_dir", os.path.join(work, "ckpt"), "--endpoint", t["endpoint"],
                    "--ca", t["ca"], "--cert", t["cert"], "--key", t["key"], "--threads", "1",
                    "--json"]
            logs = [os.path.join(work, "trainer-%d.log" % i) for i in (1, 2)]
            with open(logs[0], "w") as log:
                first = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            # Kill it once the first window is committed: it is then on the next.
            trained = 0
            first_committed = None
            for e in client.watch(campaign.name):
                if e.kind == pb.TRAINED:
                    trained += 1
                    first_committed = e.trip
                    break
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=60)
            self.assertEqual(trained, 1)
            with open(logs[1], "w") as log:
                second = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 600
            while client.get(campaign.name).state not in (pb.COMPLETED, pb.FAILED,
                                                          pb.CANCELLED, pb.PAUSED):
                self.assertLess(time.monotonic(), deadline, "the campaign did not finish")
                time.sleep(0.5)
            second.wait(timeout=120)
            final = client.get(campaign.name, include_trips=True)
            output = "".join(open(p).read() for p in logs)
            self.assertEqual(final.state, pb.COMPLETED, final.error + "\n" + output)
            windows = [json.loads(line) for line in output.splitlines()
                       if line.startswith("{")]
            ok_trips = {tr.id: tr for tr in final.trips if tr.outcome == "ok"}
            # No window was trained twice: no trip is reported by both
            # trainers (the second resumes after the committed one). Each
            # committed window is reported with all of its tokens, the one
            # committed before the kill perhaps not (the first trainer can
            # die between the commit and its line).
            printed = [w["trip"] for w in windows]
            self.assertEqual(len(printed), len(set(printed)), output)
            self.assertTrue(set(printed) <= set(ok_trips), output)
            self.assertEqual(set(ok_trips) - set(printed) - {first_committed}, set(), output)
            for w in windows:
                self.assertEqual(w["tokens"], ok_trips[w["trip"]].bytes // 2, w)
            for tr in final.trips:
                self.assertTrue(tr.digest_match and tr.scrub_verified and tr.rekeyed, tr)


if __name__ == "__main__":
    unittest.main()
