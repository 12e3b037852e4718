"""The orchestrator's scheduler API (proto/orchestrator.proto) for Python
programs: create a campaign idempotently, start it, follow its events,
pause, resume or cancel it.

    from gputravel.client import Client
    with Client.from_env() as c:            # GPUTRAVEL_ENDPOINT/_CA/_CERT/_KEY
        campaign, created = c.create(spec, request_id="nightly-2026-11-26")
        c.start(campaign.name)
        for event in c.watch(campaign.name):
            print(c.describe(event))

Every call raises ApiError (with the gRPC code, and a message naming the
orchestrator) when the orchestrator refuses it or cannot be reached.
"""

import json
import os
import uuid

import grpc

from gputravel import channel as channel_mod
from gputravel import health, reflection
from gputravel.proto import orchestrator_pb2 as pb
from gputravel.proto import orchestrator_pb2_grpc as pb_grpc

ORCHESTRATOR_SERVICE = "gputravel.v1.Orchestrator"
FINAL_STATES = frozenset([pb.COMPLETED, pb.FAILED, pb.CANCELLED])


class ApiError(RuntimeError):
    """A call the orchestrator refused or that could not reach it."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code  # grpc.StatusCode


def state_name(state):
    """"COMPLETED" for pb.COMPLETED, and so on."""
    return pb.CampaignState.Name(state)


class Client:
    """A connection to one orchestrator with an operator or scheduler
    certificate. `timeout` (seconds) bounds each call except watch."""

    def __init__(self, endpoint, files, server_name="orchestrator", timeout=30.0):
        self.endpoint = endpoint
        self.timeout = timeout
        self._channel = channel_mod.secure_channel(endpoint, files, "orchestrator", server_name)
        self._stub = pb_grpc.OrchestratorStub(self._channel)

    @classmethod
    def from_env(cls, endpoint=None, ca=None, cert=None, key=None, **kw):
        """Arguments default to GPUTRAVEL_ENDPOINT, _CA, _CERT and _KEY, as
        for the C++ CLI."""

        endpoint = endpoint or os.environ.get(channel_mod.ENV_ENDPOINT, "")
        return cls(endpoint, channel_mod.TlsFiles.from_env(ca, cert, key), **kw)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, what, method, request, timeout=None):
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as e:
            raise self._error(what, e) from None

    def _error(self, what, e):
        code = e.code()
        detail = "%s: %s" % (code.name, e.details())
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            msg = ("cannot reach the orchestrator at %s: %s: %s (is it running, and are the "
                   "endpoint and server name right?)" % (self.endpoint, what, detail))
        elif code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            msg = ("the orchestrator at %s refused %s (%s); it accepts operator and scheduler "
                   "certificates of its campaign CA" % (self.endpoint, what, detail))
        else:
            msg = "%s: %s" % (what, detail)
        return ApiError(code, msg)

    def create(self, spec, request_id=None):
        """Registers a campaign from its specification (a dict, or JSON text;
        docs/campaign-config.md). Idempotent for one request_id: repeating it
        with the same specification returns the existing campaign. Returns
        (Campaign, created). A random request_id is used when none is given;
        pass a stable one to make a retried create safe."""
        spec_json = spec if isinstance(spec, str) else json.dumps(spec)
        req = pb.CreateCampaignRequest(request_id=request_id or str(uuid.uuid4()),
                                       spec_json=spec_json)
        r = self._call("create", self._stub.CreateCampaign, req)
        return r.campaign, r.created

    def get(self, name, include_trips=False):
        return self._call("get %s" % name, self._stub.GetCampaign,
                          pb.GetCampaignRequest(name=name, include_trips=include_trips))

    def list(self):
        return list(self._call("list", self._stub.ListCampaigns,
                               pb.ListCampaignsRequest()).campaigns)

    def start(self, name):
        return self._call("start %s" % name, self._stub.StartCampaign, pb.CampaignRef(name=name))

    def pause(self, name):
        return self._call("pause %s" % name, self._stub.PauseCampaign, pb.CampaignRef(name=name))

    def resume(self, name):
        return self._call("resume %s" % name, self._stub.ResumeCampaign,
                          pb.CampaignRef(name=name))

    def cancel(self, name):
        return self._call("cancel %s" % name, self._stub.CancelCampaign,
                          pb.CampaignRef(name=name))

    def skip_holder(self, campaign, holder, reason):
        return self._call("skip %s in %s" % (holder, campaign), self._stub.SkipHolder,
                          pb.SkipHolderRequest(campaign=campaign, holder=holder, reason=reason))

    def holders(self, campaign=""):
        return list(self._call("holders", self._stub.ListHolders,
                               pb.ListHoldersRequest(campaign=campaign)).holders)

    def watch(self, name, after_seq=0, timeout=None):
        """The campaign's events (pb.Event), recorded ones after `after_seq`
        first, then live ones; the iterator ends after the event that makes
        the campaign final. Closing the iterator (or leaving the loop and
        dropping it) cancels the stream. `timeout`: seconds for the whole
        stream (default: none)."""
        try:
            stream = self._stub.WatchCampaign(pb.WatchCampaignRequest(name=name,
                                                                      after_seq=after_seq),
                                              timeout=timeout)
        except grpc.RpcError as e:
            raise self._error("watch %s" % name, e) from None
        try:
            for event in stream:
                yield event
        except grpc.RpcError as e:
            raise self._error("watch %s" % name, e) from None
        finally:
            stream.cancel()

    def health(self, service=""):
        """The health status name ("SERVING", ...) of `service`: "" (the
        default) for the whole server, or ORCHESTRATOR_SERVICE."""
        try:
            return health.check(self._channel, service, self.timeout)
        except grpc.RpcError as e:
            raise self._error("health check of '%s'" % service, e) from None

    def services(self):
        """The services the orchestrator offers (server reflection)."""
        try:
            return reflection.list_services(self._channel, self.timeout)
        except grpc.RpcError as e:
            raise self._error("reflection", e) from None

    @staticmethod
    def describe(event):
        """One line for an event, as a person reads it."""
        kind = pb.EventKind.Name(event.kind)
        parts = ["#%d" % event.seq if event.seq else "live", kind]
        if event.trip:
            parts.append("trip %d" % event.trip)
        if event.holder:
            parts.append(event.holder)
        if event.kind == pb.STEP:
            parts.append(pb.TripStep.Name(event.step))
        if event.kind == pb.CAMPAIGN_STATE:
            parts.append(state_name(event.campaign_state))
        if event.total_bytes:
            parts.append("%d/%d bytes" % (event.bytes, event.total_bytes))
        if event.has_loss:
            parts.append("loss %.4f" % event.loss)
        if event.message:
            parts.append("- " + event.message)
        return " ".join(parts)
