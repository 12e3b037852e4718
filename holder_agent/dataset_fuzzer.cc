// libFuzzer entry point for dataset files (Dataset::Open: the llm.c header,
// or a raw file) and the windows read from them. Plain C++ so gcc builds it;
// dataset_fuzzer_replay_test replays the corpus with it (tools/fuzzer.bzl).
//   input = format (1 byte: 0 "auto", 1 "llmc-tokens", 2 "raw", modulo 3)
//           || the file's bytes
// The file is an in-memory one (memfd), opened by its /proc/self/fd path as
// the agent opens a dataset. What opens must read back as the file holds it:
// the payload is the file after the header (llm.c) or the whole file (raw),
// by Read and by Map alike, and nothing past its end is read.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "holder_agent/dataset.h"

namespace {

int g_fd = -1;

void WriteFile(const uint8_t* data, size_t size) {
  if (::ftruncate(g_fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(g_fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (g_fd < 0) {
    g_fd = ::memfd_create("dataset-fuzz", MFD_CLOEXEC);
    if (g_fd < 0) std::abort();
  }
  static const char* const kFormats[] = {"auto", "llmc-tokens", "raw"};
  const std::string format = kFormats[data[0] % 3];
  const uint8_t* file = data + 1;
  const size_t file_size = size - 1;
  WriteFile(file, file_size);
  auto d = gputravel::Dataset::Open("/proc/self/fd/" + std::to_string(g_fd), format);
  if (!d.ok()) return 0;
  const uint64_t payload = (*d)->payload_bytes();
  const bool llmc = (*d)->format() == "llmc-tokens";
  const uint64_t offset = llmc ? gputravel::Dataset::kLlmcHeaderBytes : 0;
  if (payload == 0 || offset + payload != file_size) std::abort();
  if (format != "auto" && (*d)->format() != format) std::abort();
  if (llmc) {
    int32_t count;
    std::memcpy(&count, file + 8, sizeof(count));
    if (count <= 0 || uint64_t(count) * 2 != payload) std::abort();
  }
  std::vector<uint8_t> got(payload);
  if (!(*d)->Read(0, got.data(), got.size()).ok() ||
      std::memcmp(got.data(), file + offset, payload) != 0) {
    std::abort();
  }
  if ((*d)->Read(1, got.data(), got.size()).ok()) std::abort();
  if ((*d)->Read(payload, got.data(), 1).ok()) std::abort();
  const uint64_t start = payload / 3;
  if ((*d)->mappable()) {
    auto m = (*d)->Map(start, payload - start);
    if (!m.ok() || m->size() != payload - start ||
        std::memcmp(m->data(), file + offset + start, payload - start) != 0) {
      std::abort();
    }
    if ((*d)->Map(start, payload - start + 1).ok()) std::abort();
  }
  return 0;
}
