"""A libFuzzer fuzzer: its entry point, a replay test and the fuzzer binary."""

def gputravel_fuzzer(name, srcs, deps, corpus, data = [], max_len = 4096):
    """Declares NAME (the entry point LLVMFuzzerTestOneInput, plain C++),
    NAME_replay_test (replays `corpus`, a directory of this package, through
    it under any toolchain) and NAME_bin (the libFuzzer binary; tagged manual:
    built by tools/fuzz.sh with --config=asan, clang only). `max_len` is the
    longest input tools/fuzz.sh lets libFuzzer make."""
    native.cc_library(
        name = name,
        testonly = True,
        srcs = srcs,
        data = data,
        deps = deps,
        # The entry point is found by the linker, not by a header.
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_replay_test",
        size = "small",
        args = [native.package_name() + "/" + corpus],
        data = native.glob([corpus + "/**"]),
        deps = [
            ":" + name,
            "//tools:fuzz_replay",
        ],
    )
    native.cc_binary(
        name = name + "_bin",
        testonly = True,
        linkopts = ["-fsanitize=fuzzer"],
        tags = [
            "manual",
            "fuzzer",
            "max_len=%d" % max_len,
            "corpus=%s/%s" % (native.package_name(), corpus),
        ],
        deps = [":" + name],
    )
