#!/usr/bin/python3
"""Example scheduler: runs one campaign through the orchestrator's API.

    python3 python/examples/scheduler.py --spec campaign.json \\
        [--endpoint E --ca CA --cert CERT --key KEY]   # or GPUTRAVEL_* variables

Creates the campaign idempotently (the request id is derived from the
specification, so running the script again after a crash or a lost answer
finds the same campaign instead of failing), starts it unless it already
runs or ended, follows its events to the end (resuming the stream after a
broken connection from the last event seen), and prints a summary.

Exit status: 0 COMPLETED with every trip verified; 1 the campaign ended
otherwise (FAILED, CANCELLED, or a trip not verified); 2 bad usage or local
files; 3 the orchestrator refused a call or could not be reached.
"""

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gputravel import channel  # noqa: E402
from gputravel.client import ApiError, Client, FINAL_STATES, state_name  # noqa: E402
from gputravel.proto import orchestrator_pb2 as pb  # noqa: E402

EXIT_OK, EXIT_NOT_COMPLETED, EXIT_USAGE, EXIT_API = 0, 1, 2, 3


def request_id_for(spec_json):
    """A stable idempotency token for one specification."""
    return "scheduler-" + hashlib.sha256(spec_json.encode()).hexdigest()[:40]


def trip_verified(t):
    return t.outcome == "ok" and t.digest_match and t.scrub_verified and t.rekeyed


def follow(client, name, out, max_reconnects=5):
    """Prints the campaign's events until it is final, or paused (it waits
    for an operator then); reconnects (from the last event seen) after a
    broken stream. Returns the last event's seq."""
    seq = 0
    for attempt in range(max_reconnects + 1):
        try:
            for e in client.watch(name, after_seq=seq):
                if e.seq:
                    seq = e.seq
                if e.kind != pb.PROGRESS:
                    print(Client.describe(e), file=out)
                # A replayed PAUSED may have been resumed since: stop only
                # if the campaign is paused now.
                if (e.kind == pb.CAMPAIGN_STATE and e.campaign_state == pb.PAUSED
                        and client.get(name).state == pb.PAUSED):
                    return seq
            return seq
        except ApiError as e:
            if attempt == max_reconnects:
                raise
            print("watch interrupted (%s); resuming after event %d" % (e, seq), file=sys.stderr)
    return seq


def summary(c):
    lines = ["campaign %s: %s" % (c.name, state_name(c.state)),
             "trips ok %d, failed %d; %d of %d bytes provisioned"
             % (c.trips_ok, c.trips_failed, c.bytes_provisioned, c.bytes_total)]
    for t in c.trips:
        loss = " loss %.3f" % t.loss if t.has_loss else ""
        lines.append("  trip %d %-10s %10d bytes %s%s%s" % (
            t.id, t.holder, t.bytes, t.outcome, " verified" if trip_verified(t) else " NOT VERIFIED",
            loss))
    if c.error:
        lines.append("error: " + c.error)
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", required=True, help="campaign specification (JSON file)")
    p.add_argument("--endpoint", help="orchestrator endpoint (env GPUTRAVEL_ENDPOINT)")
    p.add_argument("--ca", help="campaign CA certificate (env GPUTRAVEL_CA)")
    p.add_argument("--cert", help="your scheduler certificate (env GPUTRAVEL_CERT)")
    p.add_argument("--key", help="its private key (env GPUTRAVEL_KEY)")
    p.add_argument("--server_name", default="orchestrator",
                   help="name in the orchestrator's certificate (default: %(default)s)")
    p.add_argument("--request_id", help="idempotency token (default: from the spec's digest)")
    a = p.parse_args(argv)
    try:
        with open(a.spec) as f:
            spec_json = f.read()
        json.loads(spec_json)
    except (OSError, ValueError) as e:
        print("scheduler: --spec %s: %s" % (a.spec, e), file=sys.stderr)
        return EXIT_USAGE
    try:
        client = Client.from_env(a.endpoint, a.ca, a.cert, a.key, server_name=a.server_name)
    except channel.ConfigError as e:
        print("scheduler: %s" % e, file=sys.stderr)
        return EXIT_USAGE
    with client:
        try:
            campaign, created = client.create(spec_json, a.request_id or request_id_for(spec_json))
            print("%s campaign %s (%s)" % ("created" if created else "found existing",
                                           campaign.name, state_name(campaign.state)))
            if campaign.state in (pb.CREATED, pb.PAUSED):
                campaign = (client.start if campaign.state == pb.CREATED
                            else client.resume)(campaign.name)
                print("started: %s" % state_name(campaign.state))
            follow(client, campaign.name, sys.stdout)
            final = client.get(campaign.name, include_trips=True)
        except ApiError as e:
            print("scheduler: %s" % e, file=sys.stderr)
            return EXIT_API
    print(summary(final))
    ok = (final.state == pb.COMPLETED and len(final.trips) > 0
          and all(trip_verified(t) for t in final.trips))
    return EXIT_OK if ok else EXIT_NOT_COMPLETED


if __name__ == "__main__":
    sys.exit(main())
