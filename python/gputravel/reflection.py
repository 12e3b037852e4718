"""gRPC server reflection (grpc.reflection.v1alpha) on any channel: which
services a server offers, and the descriptors of its protos, so a tool can
discover the API without the .proto files."""

from google.protobuf import descriptor_pb2

from gputravel.proto import reflection_pb2, reflection_pb2_grpc


class ReflectionError(RuntimeError):
    """The server answered a reflection request with an error."""


def _ask(channel, request, timeout):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(iter([request]), timeout=timeout)
    for r in responses:
        if r.HasField("error_response"):
            raise ReflectionError("reflection: %s (code %d)" % (
                r.error_response.error_message, r.error_response.error_code))
        return r
    raise ReflectionError("reflection: the server closed the stream without an answer")


def list_services(channel, timeout=30.0):
    """Fully qualified names of the services the server offers, sorted."""
    r = _ask(channel, reflection_pb2.ServerReflectionRequest(list_services=""), timeout)
    return sorted(s.name for s in r.list_services_response.service)


def file_containing_symbol(channel, symbol, timeout=30.0):
    """FileDescriptorProtos of the file defining `symbol` (e.g.
    "gputravel.v1.Orchestrator") and of its imports, as the server sends them."""
    r = _ask(channel, reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol),
             timeout)
    out = []
    for raw in r.file_descriptor_response.file_descriptor_proto:
        fd = descriptor_pb2.FileDescriptorProto()
        fd.ParseFromString(raw)
        out.append(fd)
    return out
