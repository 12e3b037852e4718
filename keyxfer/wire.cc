#include "keyxfer/wire.h"

namespace gputravel {

void WireWriter::U32(uint32_t v) {
  for (int i = 3; i >= 0; --i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

void WireWriter::U64(uint64_t v) {
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

void WireWriter::Bytes(absl::string_view b) {
  U32(static_cast<uint32_t>(b.size()));
  out_.append(b.data(), b.size());
}

bool WireReader::U32(uint32_t* v) {
  if (in_.size() < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) *v = (*v << 8) | static_cast<uint8_t>(in_[i]);
  in_.remove_prefix(4);
  return true;
}

bool WireReader::U64(uint64_t* v) {
  if (in_.size() < 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) *v = (*v << 8) | static_cast<uint8_t>(in_[i]);
  in_.remove_prefix(8);
  return true;
}

bool WireReader::Bytes(std::string* b) {
  uint32_t n = 0;
  if (!U32(&n) || in_.size() < n) return false;
  b->assign(in_.data(), n);
  in_.remove_prefix(n);
  return true;
}

}  // namespace gputravel
