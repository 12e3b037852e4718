#include "cli/dev_pki.h"

#include <sys/stat.h>

#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

absl::Status WriteKey(const EcKey& key, const std::string& path) {
  auto pem = key.PrivateKeyPem();
  if (!pem.ok()) return pem.status();
  return WriteFile(path, std::string(reinterpret_cast<const char*>(pem->data()), pem->size()),
                   0600);
}

absl::Status WriteCert(const std::string& der, const std::string& path) {
  auto pem = CertificateDerToPem(der);
  if (!pem.ok()) return pem.status();
  return WriteFile(path, *pem, 0644);
}

}  // namespace

DevPki DevPkiPaths(const std::string& dir, const std::vector<std::string>& domains) {
  DevPki out;
  out.device_ca_cert = dir + "/device-ca.pem";
  out.device_ca_key = dir + "/device-ca-key.pem";
  out.device_key = dir + "/device-key.pem";
  out.device_cert = dir + "/device-cert.pem";
  out.attestation_root = dir + "/attestation-root.pem";
  for (const auto& d : domains) {
    out.domains[d] = {dir + "/attest-" + d + "-key.pem", dir + "/attest-" + d + "-cert.pem"};
  }
  return out;
}

absl::StatusOr<DevPki> CreateDevPki(const std::string& dir,
                                    const std::string& device_serial,
                                    const std::vector<std::string>& domains) {
  ::mkdir(dir.c_str(), 0700);
  const DevPki out = DevPkiPaths(dir, domains);
  auto ca = EcKey::Generate(Curve::kP384);
  if (!ca.ok()) return ca.status();
  auto ca_der = IssueCertificate(*ca, "GPU Travelling dev device CA", *ca, "", true, 30);
  if (!ca_der.ok()) return ca_der.status();
  auto dev = EcKey::Generate(Curve::kP384);
  if (!dev.ok()) return dev.status();
  auto dev_der = IssueCertificate(*dev, device_serial, *ca, *ca_der, false, 30);
  if (!dev_der.ok()) return dev_der.status();
  for (const absl::Status& s : {WriteCert(*ca_der, out.device_ca_cert),
                                WriteKey(*ca, out.device_ca_key),
                                WriteKey(*dev, out.device_key),
                                WriteCert(*dev_der, out.device_cert)}) {
    if (!s.ok()) return s;
  }
  auto root = EcKey::Generate(Curve::kP256);
  if (!root.ok()) return root.status();
  auto root_der = IssueCertificate(*root, "GPU Travelling dev attestation root", *root, "",
                                   true, 30);
  if (!root_der.ok()) return root_der.status();
  absl::Status s = WriteCert(*root_der, out.attestation_root);
  if (!s.ok()) return s;
  for (const auto& d : domains) {
    auto k = EcKey::Generate(Curve::kP256);
    if (!k.ok()) return k.status();
    auto der = IssueCertificate(*k, d, *root, *root_der, false, 30);
    if (!der.ok()) return der.status();
    const DevPki::Pair& p = out.domains.at(d);
    s = WriteKey(*k, p.key);
    if (s.ok()) s = WriteCert(*der, p.cert);
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace gputravel
