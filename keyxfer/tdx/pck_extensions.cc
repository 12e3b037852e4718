#include "keyxfer/tdx/pck_extensions.h"

#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "keyxfer/tdx/openssl_util.h"

namespace gputravel::tdx {
namespace {

constexpr char kSgxExtensionsOid[] = "1.2.840.113741.1.13.1";

absl::Status Bad(absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("PCK certificate SGX extensions: ", message));
}

struct SeqFree {
  void operator()(ASN1_SEQUENCE_ANY* p) const {
    sk_ASN1_TYPE_pop_free(p, ASN1_TYPE_free);
  }
};
using Seq = std::unique_ptr<ASN1_SEQUENCE_ANY, SeqFree>;

// A DER SEQUENCE OF ANY; the whole input must be consumed.
absl::StatusOr<Seq> ParseSequence(const unsigned char* der, long len,
                                  absl::string_view what) {
  const unsigned char* p = der;
  Seq seq(d2i_ASN1_SEQUENCE_ANY(nullptr, &p, len));
  if (!seq || p != der + len) {
    ERR_clear_error();
    return Bad(absl::StrCat(what, " is not a DER SEQUENCE"));
  }
  return seq;
}

// The text form of an OBJECT, e.g. "1.2.840.113741.1.13.1.4".
std::string OidText(const ASN1_OBJECT* obj) {
  char buf[128];
  int n = OBJ_obj2txt(buf, sizeof(buf), obj, /*no_name=*/1);
  if (n <= 0 || n >= static_cast<int>(sizeof(buf))) return "";
  return buf;
}

// Reads a SEQUENCE { OBJECT, value } entry.
absl::Status Entry(ASN1_TYPE* item, std::string* oid, ASN1_TYPE** value,
                   Seq* holder) {
  if (item->type != V_ASN1_SEQUENCE) {
    return Bad("entry is not a SEQUENCE { OID, value }");
  }
  auto seq = ParseSequence(item->value.sequence->data,
                           item->value.sequence->length, "entry");
  if (!seq.ok()) return seq.status();
  if (sk_ASN1_TYPE_num(seq->get()) != 2 ||
      sk_ASN1_TYPE_value(seq->get(), 0)->type != V_ASN1_OBJECT) {
    return Bad("entry is not a SEQUENCE { OID, value }");
  }
  *oid = OidText(sk_ASN1_TYPE_value(seq->get(), 0)->value.object);
  *value = sk_ASN1_TYPE_value(seq->get(), 1);
  *holder = std::move(*seq);
  return absl::OkStatus();
}

template <size_t N>
absl::Status Octets(ASN1_TYPE* v, absl::string_view name,
                    std::array<uint8_t, N>* out) {
  if (v->type != V_ASN1_OCTET_STRING ||
      v->value.octet_string->length != static_cast<int>(N)) {
    return Bad(absl::StrFormat("%s must be an OCTET STRING of %d bytes", name,
                               N));
  }
  std::memcpy(out->data(), v->value.octet_string->data, N);
  return absl::OkStatus();
}

absl::Status Integer(ASN1_TYPE* v, absl::string_view name, long max,
                     long* out) {
  int64_t x = 0;
  int ok = 0;
  if (v->type == V_ASN1_INTEGER) {
    ok = ASN1_INTEGER_get_int64(&x, v->value.integer);
  } else if (v->type == V_ASN1_ENUMERATED) {
    ok = ASN1_ENUMERATED_get_int64(&x, v->value.enumerated);
  }
  if (ok != 1 || x < 0 || x > max) {
    ERR_clear_error();
    return Bad(absl::StrFormat("%s must be an INTEGER in 0..%d", name, max));
  }
  *out = static_cast<long>(x);
  return absl::OkStatus();
}

absl::Status ParseTcb(ASN1_TYPE* v, PckExtensions* out) {
  if (v->type != V_ASN1_SEQUENCE) return Bad("TCB (.2) is not a SEQUENCE");
  auto seq = ParseSequence(v->value.sequence->data, v->value.sequence->length,
                           "TCB (.2)");
  if (!seq.ok()) return seq.status();
  uint32_t seen = 0;  // bit i-1 for TCB entry .2.i
  const std::string prefix = absl::StrCat(kSgxExtensionsOid, ".2.");
  for (int i = 0; i < sk_ASN1_TYPE_num(seq->get()); ++i) {
    std::string oid;
    ASN1_TYPE* value = nullptr;
    Seq holder;
    if (auto s = Entry(sk_ASN1_TYPE_value(seq->get(), i), &oid, &value,
                       &holder);
        !s.ok()) {
      return s;
    }
    if (oid.rfind(prefix, 0) != 0) continue;
    int index = 0;
    if (!absl::SimpleAtoi(oid.substr(prefix.size()), &index) || index < 1 ||
        index > 18) {
      continue;
    }
    if (seen & (1u << (index - 1))) {
      return Bad(absl::StrCat("TCB entry ", oid, " appears twice"));
    }
    seen |= 1u << (index - 1);
    long x = 0;
    if (index <= 16) {
      if (auto s = Integer(value, absl::StrCat("SGX TCB component ", index),
                           255, &x);
          !s.ok()) {
        return s;
      }
      out->sgx_tcb_components[index - 1] = static_cast<uint8_t>(x);
    } else if (index == 17) {
      if (auto s = Integer(value, "PCESVN", 65535, &x); !s.ok()) return s;
      out->pce_svn = static_cast<uint16_t>(x);
    } else {
      if (auto s = Octets(value, "CPUSVN", &out->cpu_svn); !s.ok()) return s;
    }
  }
  if (seen != (1u << 18) - 1) {
    for (int i = 1; i <= 18; ++i) {
      if (!(seen & (1u << (i - 1)))) {
        return Bad(absl::StrCat("TCB entry ", prefix, i, " is missing"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PckExtensions> ParsePckExtensions(X509* cert) {
  ASN1_OBJECT* oid = OBJ_txt2obj(kSgxExtensionsOid, /*no_name=*/1);
  if (oid == nullptr) return absl::InternalError(DrainOpensslErrors());
  int pos = X509_get_ext_by_OBJ(cert, oid, -1);
  int again = pos >= 0 ? X509_get_ext_by_OBJ(cert, oid, pos) : -1;
  ASN1_OBJECT_free(oid);
  if (pos < 0) {
    return Bad(absl::StrCat("extension ", kSgxExtensionsOid,
                            " is missing (not a PCK certificate)"));
  }
  if (again >= 0) return Bad("extension appears twice");
  ASN1_OCTET_STRING* data = X509_EXTENSION_get_data(X509_get_ext(cert, pos));
  auto top = ParseSequence(data->data, data->length, "extension value");
  if (!top.ok()) return top.status();

  PckExtensions out;
  uint32_t seen = 0;
  const std::string prefix = absl::StrCat(kSgxExtensionsOid, ".");
  for (int i = 0; i < sk_ASN1_TYPE_num(top->get()); ++i) {
    std::string name;
    ASN1_TYPE* value = nullptr;
    Seq holder;
    if (auto s = Entry(sk_ASN1_TYPE_value(top->get(), i), &name, &value,
                       &holder);
        !s.ok()) {
      return s;
    }
    int index = 0;
    if (name.rfind(prefix, 0) != 0 ||
        !absl::SimpleAtoi(name.substr(prefix.size()), &index) || index < 1 ||
        index > 5) {
      continue;  // platform instance id, configuration: not needed here
    }
    if (seen & (1u << index)) return Bad(absl::StrCat(name, " appears twice"));
    seen |= 1u << index;
    absl::Status s;
    long x = 0;
    switch (index) {
      case 1: s = Octets(value, "PPID (.1)", &out.ppid); break;
      case 2: s = ParseTcb(value, &out); break;
      case 3: s = Octets(value, "PCE-ID (.3)", &out.pce_id); break;
      case 4: s = Octets(value, "FMSPC (.4)", &out.fmspc); break;
      case 5:
        s = Integer(value, "SGX type (.5)", 255, &x);
        out.sgx_type = static_cast<int>(x);
        break;
    }
    if (!s.ok()) return s;
  }
  constexpr const char* kNames[] = {"", "PPID", "TCB", "PCE-ID", "FMSPC",
                                    "SGX type"};
  for (int i = 1; i <= 5; ++i) {
    if (!(seen & (1u << i))) {
      return Bad(absl::StrCat(kNames[i], " (", prefix, i, ") is missing"));
    }
  }
  return out;
}

absl::StatusOr<PckExtensions> ParsePckExtensionsPem(absl::string_view pem) {
  auto cert = ParsePemCertificate(pem);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PCK certificate does not parse: ", cert.status().message()));
  }
  return ParsePckExtensions(cert->get());
}

}  // namespace gputravel::tdx
