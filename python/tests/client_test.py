"""gputravel.client and examples/scheduler.py against the REAL orchestrator
(the emulated stack of `gputravel demo --serve`, separate processes, mTLS)."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gputravel import channel  # noqa: E402
from gputravel.client import ApiError, Client, ORCHESTRATOR_SERVICE  # noqa: E402
from gputravel.proto import orchestrator_pb2 as pb  # noqa: E402
from examples import scheduler  # noqa: E402
from tests.served_stack import ServedStack  # noqa: E402


class ClientAgainstOrchestratorTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.stack = ServedStack(holders=2).__enter__()
        ca, cert, key = cls.stack.tls("scheduler")
        cls.client = Client(cls.stack.info["endpoint"], channel.TlsFiles(ca, cert, key))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.stack.__exit__(None, None, None)

    def spec(self, name):
        s = dict(self.stack.info["spec"])
        s["name"] = name
        return s

    def test_health_and_reflection_without_hand_written_protos(self):
        self.assertEqual(self.client.health(""), "SERVING")
        self.assertEqual(self.client.health(ORCHESTRATOR_SERVICE), "SERVING")
        self.assertIn(ORCHESTRATOR_SERVICE, self.client.services())
        self.assertIn("grpc.health.v1.Health", self.client.services())

    def test_example_scheduler_completes_a_campaign_and_is_idempotent(self):
        ca, cert, key = self.stack.tls("scheduler")
        spec_path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "spec.json")
        with open(spec_path, "w") as f:
            json.dump(self.spec("py-scheduler"), f)
        args = ["--spec", spec_path, "--endpoint", self.stack.info["endpoint"],
                "--ca", ca, "--cert", cert, "--key", key]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = scheduler.main(args)
        self.assertEqual(rc, scheduler.EXIT_OK, out.getvalue())
        self.assertIn("created campaign py-scheduler", out.getvalue())
        self.assertIn("CAMPAIGN_STATE COMPLETED", out.getvalue())
        self.assertIn("campaign py-scheduler: COMPLETED", out.getvalue())
        # Every trip of both holders, each verified.
        c = self.client.get("py-scheduler", include_trips=True)
        verified = [l for l in out.getvalue().splitlines()
                    if l.startswith("  trip ") and " ok verified" in l]
        self.assertEqual(len(verified), len(c.trips))
        self.assertEqual({t.holder for t in c.trips}, {"holder-a", "holder-b"})
        # Run again (a retry after a crash): the same campaign, found, not redone.
        again = io.StringIO()
        with contextlib.redirect_stdout(again):
            rc = scheduler.main(args)
        self.assertEqual(rc, scheduler.EXIT_OK, again.getvalue())
        self.assertIn("found existing campaign py-scheduler (COMPLETED)", again.getvalue())
        self.assertEqual(self.client.get("py-scheduler").trips_ok, c.trips_ok)

    def test_create_is_idempotent_per_request_id(self):
        spec = self.spec("py-idempotent")
        c1, created1 = self.client.create(spec, request_id="req-py-idem")
        c2, created2 = self.client.create(spec, request_id="req-py-idem")
        self.assertTrue(created1)
        self.assertFalse(created2)
        self.assertEqual(c1.name, c2.name)
        self.assertEqual(c2.state, pb.CREATED)
        other = self.spec("py-idempotent")
        other["rounds"] = 2
        with self.assertRaises(ApiError) as e:
            self.client.create(other, request_id="req-py-idem")
        self.assertEqual(e.exception.code, grpc.StatusCode.ALREADY_EXISTS)

    def test_pause_resume_cancel_and_watch_to_the_end(self):
        c, _ = self.client.create(self.spec("py-cancel"), request_id="req-py-cancel")
        self.assertEqual(self.client.resume(c.name).state, pb.RUNNING)
        self.assertIn(self.client.pause(c.name).state, (pb.PAUSING, pb.PAUSED))
        self.assertIn(self.client.cancel(c.name).state, (pb.CANCELLING, pb.CANCELLED))
        states = [e.campaign_state for e in self.client.watch(c.name)
                  if e.kind == pb.CAMPAIGN_STATE]
        self.assertEqual(states[0], pb.CREATED)
        self.assertEqual(states[-1], pb.CANCELLED)
        self.assertEqual(self.client.get(c.name).state, pb.CANCELLED)
        with self.assertRaises(ApiError) as e:
            self.client.cancel(c.name)
        self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)

    def test_unknown_campaign_is_not_found(self):
        with self.assertRaises(ApiError) as e:
            self.client.get("no-such-campaign")
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_holder_certificate_is_refused_naming_the_orchestrator(self):
        ca, _, _ = self.stack.tls("scheduler")
        files = channel.TlsFiles(ca, self.stack.pki_file("holder-holder-a.pem"),
                                 self.stack.pki_file("holder-holder-a.key"))
        with Client(self.stack.info["endpoint"], files) as holder:
            with self.assertRaises(ApiError) as e:
                holder.list()
        self.assertEqual(e.exception.code, grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("the orchestrator at " + self.stack.info["endpoint"], str(e.exception))

    def test_a_server_of_another_identity_is_refused(self):
        ca, cert, key = self.stack.tls("scheduler")
        with Client(self.stack.info["endpoint"], channel.TlsFiles(ca, cert, key),
                    server_name="impostor", timeout=10) as c:
            with self.assertRaises(ApiError) as e:
                c.list()
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_missing_key_file_is_named(self):
        ca, cert, _ = self.stack.tls("scheduler")
        with self.assertRaises(channel.ConfigError) as e:
            Client(self.stack.info["endpoint"], channel.TlsFiles(ca, cert, "/nonexistent.key"))
        self.assertIn("key: cannot read /nonexistent.key", str(e.exception))


if __name__ == "__main__":
    unittest.main()
