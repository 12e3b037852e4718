// Feeds files (or every file in directories) to LLVMFuzzerTestOneInput, so a
// fuzzer's corpus and its past crash inputs run as a regression test under any
// toolchain, without libFuzzer (tools/fuzzer.bzl: NAME_replay_test).
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as with libFuzzer: a fuzzer's one-time set-up.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool RunFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    struct stat st;
    if (stat(arg.c_str(), &st) != 0) {
      std::fprintf(stderr, "cannot stat %s\n", arg.c_str());
      return 1;
    }
    std::vector<std::string> files;
    if (S_ISDIR(st.st_mode)) {
      DIR* d = opendir(arg.c_str());
      while (dirent* e = d ? readdir(d) : nullptr) {
        std::string name = e->d_name;
        if (name != "." && name != "..") files.push_back(arg + "/" + name);
      }
      if (d) closedir(d);
    } else {
      files.push_back(arg);
    }
    for (const auto& f : files) {
      if (!RunFile(f)) {
        std::fprintf(stderr, "cannot read %s\n", f.c_str());
        return 1;
      }
      ++inputs;
    }
  }
  std::printf("replayed %d inputs without a crash\n", inputs);
  return inputs > 0 ? 0 : 1;
}
