#include "keyxfer/runtime_measurement.h"

#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/hex.h"

namespace gputravel {
namespace {

constexpr char kLabelPrefix[] = "gputravel-rtmr3-v1 ";

// SHA-384 over data fed in pieces; every OpenSSL result is checked.
class Sha384Stream {
 public:
  Sha384Stream() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), EVP_sha384(), nullptr) == 1;
  }
  void Update(const char* data, size_t n) {
    ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), data, n) == 1;
  }
  void Update(absl::string_view s) { Update(s.data(), s.size()); }
  absl::StatusOr<std::string> Final() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ok_ = ok_ && EVP_DigestFinal_ex(ctx_.get(), out, &len) == 1 && len == kRtmrBytes;
    if (!ok_) return absl::InternalError("OpenSSL: SHA-384 failed");
    return std::string(reinterpret_cast<char*>(out), len);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
  bool ok_ = false;
};

void StartEvent(Sha384Stream* h, int event) {
  h->Update(absl::StrCat(kLabelPrefix, Rtmr3EventName(event)));
  h->Update("\0", 1);
}

absl::Status HashFileInto(const std::string& path, Sha384Stream* h) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path + " to measure it");
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(&buf[0], static_cast<std::streamsize>(buf.size()));
    h->Update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::DataLossError("error reading " + path + " to measure it");
  return absl::OkStatus();
}

// A trusted file (a CA certificate: small), whole.
constexpr size_t kMaxTrustedFileBytes = 1 << 20;
absl::StatusOr<std::string> ReadTrustedFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path + " to measure it");
  std::string out(kMaxTrustedFileBytes + 1, '\0');
  in.read(&out[0], static_cast<std::streamsize>(out.size()));
  if (in.bad()) return absl::DataLossError("error reading " + path + " to measure it");
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.size() > kMaxTrustedFileBytes) {
    return absl::InvalidArgumentError(path + " is larger than " +
                                      std::to_string(kMaxTrustedFileBytes) +
                                      " bytes: not a CA certificate file");
  }
  return out;
}

absl::StatusOr<std::string> EventOf(int event, absl::string_view content) {
  Sha384Stream h;
  StartEvent(&h, event);
  h.Update(content);
  return h.Final();
}

// The files a daemon trusts, by JSON pointer. Private keys and datasets are
// not among them: keys are secrets, and a dataset is data, not trust.
std::vector<nlohmann::json::json_pointer> TrustedFilePointers(const nlohmann::json& config) {
  using Ptr = nlohmann::json::json_pointer;
  std::vector<Ptr> out;
  for (const char* p : {"/tls/ca", "/attestation/tdx/root_ca", "/attestation/dev_root_ca"}) {
    if (config.contains(Ptr(p))) out.emplace_back(p);
  }
  if (config.contains("gpus") && config["gpus"].is_array()) {
    for (size_t i = 0; i < config["gpus"].size(); ++i) {
      Ptr p(absl::StrCat("/gpus/", i, "/device_ca"));
      if (config.contains(p)) out.push_back(p);
    }
  }
  return out;
}

}  // namespace

const char* Rtmr3EventName(int event) {
  switch (event) {
    case kRtmr3BinaryEvent:
      return "binary";
    case kRtmr3ConfigEvent:
      return "config";
    case kRtmr3PeerPinsEvent:
      return "peer_pins";
  }
  return "unknown";
}

absl::StatusOr<std::string> RuntimeMeasurement::File(const std::string& pointer,
                                                     const std::string& field) const {
  auto it = trusted_files.find(pointer);
  if (it == trusted_files.end()) {
    return absl::FailedPreconditionError(field + ": not among the files measured at start-up");
  }
  return it->second;
}

std::string ExtendRtmr(absl::string_view rtmr, absl::string_view digest) {
  Sha384Stream h;
  h.Update(rtmr);
  h.Update(digest);
  auto out = h.Final();
  // SHA-384 over memory fails only if OpenSSL itself is broken; an empty
  // result then matches no pin.
  return out.ok() ? *out : std::string();
}

std::string ReplayRtmr(const std::vector<std::string>& digests) {
  std::string r(kRtmrBytes, '\0');
  for (const std::string& d : digests) r = ExtendRtmr(r, d);
  return r;
}

absl::StatusOr<std::string> Sha384File(const std::string& path) {
  Sha384Stream h;
  absl::Status s = HashFileInto(path, &h);
  if (!s.ok()) return s;
  return h.Final();
}

absl::StatusOr<nlohmann::json> CanonicalConfig(const std::string& daemon,
                                               const nlohmann::json& config,
                                               const std::string& where,
                                               std::map<std::string, std::string>* contents) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(where + ": must be a JSON object");
  }
  nlohmann::json files = nlohmann::json::object();
  for (const auto& p : TrustedFilePointers(config)) {
    const nlohmann::json& v = config.at(p);
    if (!v.is_string()) {
      return absl::InvalidArgumentError(where + ": " + p.to_string() + ": must be a file path");
    }
    // Read once, hashed from memory, and those very bytes handed back: no
    // second read can see another file.
    auto bytes = ReadTrustedFile(v.get<std::string>());
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          where + ": " + p.to_string() + ": " +
                              std::string(bytes.status().message()));
    }
    Sha384Stream h;
    h.Update(*bytes);
    auto digest = h.Final();
    if (!digest.ok()) return digest.status();
    files[p.to_string()] = HexEncode(*digest);
    if (contents != nullptr) (*contents)[p.to_string()] = std::move(*bytes);
  }
  nlohmann::json measured = config;
  measured.erase("listen");
  // The orchestrator's pins of its holders are its peer_pins event alone
  // (they name the holders' config events, which name the orchestrator's
  // config: in the config event they would be circular). Any other daemon's
  // pins of its peer's binary and config stay in its config event, so a
  // peer that pins that event sees them edited; only its pin of the peer's
  // peer_pins event is left out (circular the same way).
  const nlohmann::json::json_pointer pins(kPeerRtmr3Pointer);
  if (measured.contains(pins)) {
    if (daemon == "orchestrator" || !measured.at(pins).is_object()) {
      measured.at(pins.parent_pointer()).erase(pins.back());
    } else {
      measured.at(pins).erase("peer_pins");
    }
  }
  return nlohmann::json{{"daemon", daemon}, {"config", measured}, {"trusted_files", files}};
}

absl::StatusOr<std::string> Rtmr3BinaryEvent(const std::string& binary_path) {
  Sha384Stream binary;
  StartEvent(&binary, kRtmr3BinaryEvent);
  absl::Status s = HashFileInto(binary_path, &binary);
  if (!s.ok()) return s;
  return binary.Final();
}

absl::StatusOr<std::string> Rtmr3ConfigEvent(const std::string& daemon,
                                             const nlohmann::json& config,
                                             const std::string& where) {
  auto doc = CanonicalConfig(daemon, config, where);
  if (!doc.ok()) return doc.status();
  return EventOf(kRtmr3ConfigEvent, doc->dump());
}

absl::StatusOr<std::string> Rtmr3PeerPinsEvent(const nlohmann::json& config) {
  const nlohmann::json::json_pointer pins(kPeerRtmr3Pointer);
  return EventOf(kRtmr3PeerPinsEvent,
                 config.is_object() && config.contains(pins) ? config.at(pins).dump()
                                                             : std::string("null"));
}

absl::StatusOr<RuntimeMeasurement> MeasureDaemon(const std::string& daemon,
                                                 const std::string& binary_path,
                                                 const nlohmann::json& config,
                                                 const std::string& where) {
  RuntimeMeasurement m;
  auto b = Rtmr3BinaryEvent(binary_path);
  if (!b.ok()) return b.status();
  m.events[kRtmr3BinaryEvent] = *b;

  // The config event from the very bytes handed back in trusted_files.
  auto doc = CanonicalConfig(daemon, config, where, &m.trusted_files);
  if (!doc.ok()) return doc.status();
  auto c = EventOf(kRtmr3ConfigEvent, doc->dump());
  if (!c.ok()) return c.status();
  m.events[kRtmr3ConfigEvent] = *c;

  auto p = Rtmr3PeerPinsEvent(config);
  if (!p.ok()) return p.status();
  m.events[kRtmr3PeerPinsEvent] = *p;

  m.rtmr3 = ReplayRtmr(m.EventList());
  return m;
}

}  // namespace gputravel
