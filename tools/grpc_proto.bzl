"""Protobuf + gRPC C++ code generation with Debian's protoc and grpc_cpp_plugin."""

def grpc_cc_proto(name, srcs, deps = [], visibility = None):
    """Generates C++ messages and gRPC stubs for `srcs` and wraps them in a cc_library.

    Args:
      name: the cc_library name.
      srcs: .proto files in this package (imports resolve from the workspace root).
      deps: other grpc_cc_proto libraries whose .proto files are imported.
      visibility: visibility of the cc_library.
    """
    bases = [s[:-len(".proto")] for s in srcs]
    pkg = native.package_name()
    outs = []
    hdrs = []
    for b in bases:
        outs += [b + ".pb.cc", b + ".pb.h", b + ".grpc.pb.cc", b + ".grpc.pb.h"]
        hdrs += [b + ".pb.h", b + ".grpc.pb.h"]
    dep_protos = [d + "_srcs" for d in deps]
    native.filegroup(name = name + "_srcs", srcs = srcs + dep_protos, visibility = visibility)
    native.genrule(
        name = name + "_gen",
        srcs = srcs + dep_protos,
        outs = outs,
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " +
               " ".join(["%s/%s" % (pkg, s) for s in srcs])),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = hdrs,
        deps = deps + ["//third_party/system:grpc", "//third_party/system:protobuf"],
        visibility = visibility,
    )
