"""The standard gRPC health check (grpc.health.v1) on any channel."""

from gputravel.proto import health_pb2, health_pb2_grpc

SERVING = "SERVING"


def check(channel, service="", timeout=30.0):
    """The serving status of `service` ("" for the server as a whole) as a
    name: "SERVING", "NOT_SERVING" or "UNKNOWN". grpc.RpcError as raised
    (NOT_FOUND for a service the server does not know)."""
    stub = health_pb2_grpc.HealthStub(channel)
    r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)
