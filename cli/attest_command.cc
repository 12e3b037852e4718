#include "cli/attest_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "keyxfer/tdx/appraisal.h"
#include "keyxfer/tdx/collateral_store.h"
#include "util/hex.h"
#include "keyxfer/tdx/intel_root_ca.h"
#include "keyxfer/tdx/pck_extensions.h"
#include "keyxfer/tdx/policy.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/quote_verifier.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/flags.h"

namespace gputravel {
namespace {

using Json = nlohmann::json;

std::string Utc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

std::string StatusText(const absl::Status& s) {
  return s.ok() ? "ok" : std::string(s.message());
}

Json QuoteJson(const tdx::Quote& q) {
  const tdx::TdReportBody& b = q.body;
  Json body = {
      {"tee_tcb_svn", HexEncode(b.tee_tcb_svn)},
      {"mrseam", HexEncode(b.mr_seam)},
      {"mrsignerseam", HexEncode(b.mr_signer_seam)},
      {"seam_attributes", Hex64(b.seam_attributes)},
      {"td_attributes", Hex64(b.td_attributes)},
      {"debug", (b.td_attributes & tdx::kTdAttributeDebug) != 0},
      {"xfam", Hex64(b.xfam)},
      {"mrtd", HexEncode(b.mr_td)},
      {"mrconfigid", HexEncode(b.mr_config_id)},
      {"mrowner", HexEncode(b.mr_owner)},
      {"mrownerconfig", HexEncode(b.mr_owner_config)},
      {"rtmr0", HexEncode(b.rtmr[0])},
      {"rtmr1", HexEncode(b.rtmr[1])},
      {"rtmr2", HexEncode(b.rtmr[2])},
      {"rtmr3", HexEncode(b.rtmr[3])},
      {"report_data", HexEncode(b.report_data)},
  };
  if (b.tee_tcb_svn_2.has_value()) {
    body["tee_tcb_svn_2"] = HexEncode(*b.tee_tcb_svn_2);
  }
  if (b.mr_service_td.has_value()) {
    body["mrservicetd"] = HexEncode(*b.mr_service_td);
  }
  return {{"version", q.header.version},
          {"body_type", q.body_type == tdx::kBodyTypeTdx15 ? "TDX 1.5" : "TDX 1.0"},
          {"body", body},
          {"qe_svn", q.qe_report.isv_svn},
          {"length", q.length},
          {"unsigned_trailing_bytes", q.trailing_bytes},
          {"unsigned_trailing_nonzero_bytes", q.trailing_nonzero_bytes}};
}

Json AppraisalJson(const tdx::Quote& q, const tdx::Appraisal& a) {
  Json chain = Json::array();
  for (const tdx::CertificateSummary& c : a.pck_chain) {
    chain.push_back({{"subject", c.subject},
                     {"issuer", c.issuer},
                     {"serial", c.serial},
                     {"not_before", Utc(c.not_before)},
                     {"not_after", Utc(c.not_after)}});
  }
  Json out = {{"quote", QuoteJson(q)},
              {"pck_chain", chain},
              {"authenticity", StatusText(a.authenticity)}};
  if (!q.pck_chain_pem.empty()) {
    auto pck = tdx::ParsePckExtensionsPem(q.pck_chain_pem[0]);
    if (pck.ok()) {
      out["pck"] = {{"fmspc", HexEncode(pck->fmspc)},
                    {"pce_id", HexEncode(pck->pce_id)},
                    {"pce_svn", pck->pce_svn},
                    {"sgx_tcb_components", HexEncode(pck->sgx_tcb_components)},
                    {"cpu_svn", HexEncode(pck->cpu_svn)}};
    }
  }
  if (!a.with_collateral) {
    out["collateral"] = "none given (TCB not evaluated)";
  } else {
    out["collateral"] = StatusText(a.collateral);
    if (a.verified_collateral.has_value()) {
      const tdx::VerifiedCollateral& c = *a.verified_collateral;
      out["collateral_dates"] = {
          {"tcb_info_issue_date", Utc(c.tcb_info.issue_date)},
          {"tcb_info_next_update", Utc(c.tcb_info.next_update)},
          {"qe_identity_issue_date", Utc(c.qe_identity.issue_date)},
          {"qe_identity_next_update", Utc(c.qe_identity.next_update)},
          {"pck_crl_next_update", Utc(c.pck_crl.next_update)},
          {"root_ca_crl_next_update", Utc(c.root_ca_crl.next_update)},
          {"tcb_evaluation_data_number", c.tcb_info.tcb_evaluation_data_number}};
    }
    if (a.collateral.ok() && a.authenticity.ok()) {
      out["tcb"] = StatusText(a.tcb);
    }
    if (a.tcb_evaluation.has_value()) {
      const tdx::TcbEvaluation& e = *a.tcb_evaluation;
      out["tcb_level"] = {{"status", e.status},
                          {"advisory_ids", e.advisory_ids},
                          {"level_index", e.level_index},
                          {"level_status", e.level_status},
                          {"level_tcb_date", Utc(e.level_tcb_date)},
                          {"tdx_module_identity", e.tdx_module_id},
                          {"tdx_module_status", e.tdx_module_status},
                          {"qe_isv_svn", e.qe_isv_svn},
                          {"qe_status", e.qe_status}};
    }
  }
  out["policy_violations"] = a.violations;
  absl::Status verdict = a.Verdict();
  out["verdict"] = verdict.ok() ? "accepted" : "refused";
  if (!verdict.ok()) out["reason"] = std::string(verdict.message());
  return out;
}

std::string AppraisalText(const Json& j) {
  std::string out;
  const Json& q = j["quote"];
  absl::StrAppend(&out, "Quote: version ", q["version"].dump(), ", ",
                  q["body_type"].get<std::string>(), " body, ",
                  q["length"].dump(), " bytes");
  if (q["unsigned_trailing_bytes"].get<size_t>() > 0) {
    absl::StrAppend(&out, " + ", q["unsigned_trailing_bytes"].dump(),
                    " unsigned trailing bytes ignored (",
                    q["unsigned_trailing_nonzero_bytes"].dump(), " non-zero)");
  }
  out += "\n";
  for (const auto& item : q["body"].items()) {
    absl::StrAppend(&out, absl::StrFormat("  %-16s %s\n", item.key(),
                                          item.value().is_string()
                                              ? item.value().get<std::string>()
                                              : item.value().dump()));
  }
  absl::StrAppend(&out, absl::StrFormat("  %-16s %s\n", "qe_svn", q["qe_svn"].dump()));
  out += "PCK certificate chain:\n";
  for (const Json& c : j["pck_chain"]) {
    absl::StrAppend(&out, "  ", c["subject"].get<std::string>(), " (serial ",
                    c["serial"].get<std::string>(), ", ",
                    c["not_before"].get<std::string>(), " .. ",
                    c["not_after"].get<std::string>(), ")\n");
  }
  if (j.contains("pck")) {
    absl::StrAppend(&out, "PCK platform: FMSPC ", j["pck"]["fmspc"].get<std::string>(),
                    ", PCE-ID ", j["pck"]["pce_id"].get<std::string>(), ", PCESVN ",
                    j["pck"]["pce_svn"].dump(), ", SGX TCB components ",
                    j["pck"]["sgx_tcb_components"].get<std::string>(), "\n");
  }
  absl::StrAppend(&out, "Authenticity: ", j["authenticity"].get<std::string>(), "\n");
  absl::StrAppend(&out, "Collateral: ", j["collateral"].get<std::string>(), "\n");
  if (j.contains("collateral_dates")) {
    for (const auto& item : j["collateral_dates"].items()) {
      absl::StrAppend(&out, "  ", item.key(), ": ",
                      item.value().is_string() ? item.value().get<std::string>()
                                               : item.value().dump(),
                      "\n");
    }
  }
  if (j.contains("tcb")) absl::StrAppend(&out, "TCB: ", j["tcb"].get<std::string>(), "\n");
  if (j.contains("tcb_level")) {
    const Json& t = j["tcb_level"];
    absl::StrAppend(&out, "TCB status: ", t["status"].get<std::string>(), " (level ",
                    t["level_index"].dump(), " ", t["level_status"].get<std::string>(),
                    " of ", t["level_tcb_date"].get<std::string>(), "; TDX module ",
                    t["tdx_module_identity"].get<std::string>().empty()
                        ? std::string("tdxModule")
                        : t["tdx_module_identity"].get<std::string>() + " " +
                              t["tdx_module_status"].get<std::string>(),
                    "; QE ISVSVN ", t["qe_isv_svn"].dump(), " ",
                    t["qe_status"].get<std::string>(), ")\n");
    std::vector<std::string> ids = t["advisory_ids"].get<std::vector<std::string>>();
    absl::StrAppend(&out, "Advisories: ", ids.empty() ? "none" : absl::StrJoin(ids, ", "),
                    "\n");
  }
  for (const Json& v : j["policy_violations"]) {
    absl::StrAppend(&out, "Policy: ", v.get<std::string>(), "\n");
  }
  absl::StrAppend(&out, "Verdict: ", j["verdict"].get<std::string>(), "\n");
  return out;
}

int ExitCodeFor(const tdx::Appraisal& a) {
  if (!a.authenticity.ok()) return kAttestNotAuthentic;
  if (a.with_collateral && !a.collateral.ok()) return kAttestNotAuthentic;
  if (a.with_collateral && !a.tcb.ok()) {
    // Collateral of another platform is a collateral problem; a TCB that
    // matches no level is the platform's.
    return a.tcb.code() == absl::StatusCode::kPermissionDenied ? kAttestRefused
                                                               : kAttestNotAuthentic;
  }
  return a.violations.empty() ? kAttestAccepted : kAttestRefused;
}

AttestVerifyOutput Fail(int code, const std::string& message) {
  return {code, "gputravel attest verify: " + message + "\n"};
}

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "gputravel attest: %s\nUsage: gputravel attest verify QUOTE [--collateral "
               "FILE|DIR] [--policy FILE] [--at TIME] [--json]\n"
               "       gputravel attest quote --report_data HEX [--configfs_root DIR] "
               "[--out FILE]\n",
               message.c_str());
  return kAttestUsage;
}

int VerifyMain(int argc, char** argv) {
  Flags flags("gputravel attest verify",
              "Parses and verifies a TDX quote offline: the quote's measurements,\n"
              "attributes, SVNs and REPORTDATA; its PCK certificate chain to the\n"
              "compiled-in Intel SGX Root CA; with --collateral, Intel's TCB info, QE\n"
              "identity and CRLs, the TCB level, status and advisories; and the policy\n"
              "verdict with every reason (REPORTDATA is not checked). Exit status: 0\n"
              "accepted, 1 refused (TCB not supported or policy), 2 bad usage, 3 not\n"
              "authentic (malformed, signature, chain, revocation or collateral), 4 a file\n"
              "cannot be read.");
  flags.String("collateral", "",
               "Intel collateral: a bundle file or a directory of them (one per FMSPC).");
  flags.String("policy", "", "Policy JSON (docs/tdx-attestation.md); default {}.");
  flags.String("at", "", "Verification time, RFC 3339 (default: now).");
  flags.Bool("json", "Print the report as JSON.");
  absl::Status ps = flags.Parse(argc, argv, 3);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!ps.ok()) return Usage(std::string(ps.message()));
  if (flags.positional().size() != 1) return Usage("verify takes exactly one QUOTE file");
  AttestVerifyInput in;
  in.quote_path = flags.positional()[0];
  in.collateral_path = flags.Get("collateral");
  in.policy_path = flags.Get("policy");
  in.json = flags.IsSet("json");
  in.at = absl::Now();
  if (!flags.Get("at").empty()) {
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, flags.Get("at"), &in.at, &err)) {
      return Usage("--at must be an RFC 3339 time such as 2025-07-01T00:00:00Z, not '" +
                   flags.Get("at") + "'");
    }
  }
  AttestVerifyOutput out = AttestVerify(in);
  std::fputs(out.text.c_str(), out.exit_code == kAttestIoError ? stderr : stdout);
  return out.exit_code;
}

int QuoteMain(int argc, char** argv) {
  Flags flags("gputravel attest quote",
              "Inside a TD: asks configfs-tsm for a TDX quote whose REPORTDATA is the\n"
              "given 64 bytes, and writes it (raw bytes) to --out or stdout. Use it to\n"
              "gather reference values with `attest verify`. Exit status: 0, 2 bad usage,\n"
              "4 configfs-tsm failed.");
  flags.String("report_data", "", "REPORTDATA, 128 hex characters (required).");
  flags.String("configfs_root", "/sys/kernel/config/tsm/report",
               "The configfs-tsm report directory.");
  flags.String("out", "", "Write the quote here (default: stdout).");
  absl::Status ps = flags.Parse(argc, argv, 3);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!ps.ok()) return Usage(std::string(ps.message()));
  if (!flags.positional().empty()) return Usage("quote takes no positional argument");
  auto bytes = HexDecodeExact(flags.Get("report_data"), 64);
  if (!bytes.ok()) return Usage("--report_data: " + std::string(bytes.status().message()));
  std::array<uint8_t, 64> report_data{};
  std::copy(bytes->begin(), bytes->end(), report_data.begin());
  tdx::ConfigfsTsmOptions options;
  options.root = flags.Get("configfs_root");
  auto quote = AttestQuote(report_data, options);
  if (!quote.ok()) {
    std::fprintf(stderr, "gputravel attest quote: %s\n",
                 std::string(quote.status().message()).c_str());
    return kAttestIoError;
  }
  if (!flags.Get("out").empty()) {
    absl::Status w = WriteFile(flags.Get("out"), *quote);
    if (!w.ok()) {
      std::fprintf(stderr, "gputravel attest quote: %s\n", std::string(w.message()).c_str());
      return kAttestIoError;
    }
    return 0;
  }
  std::fwrite(quote->data(), 1, quote->size(), stdout);
  return 0;
}

}  // namespace

AttestVerifyOutput AttestVerify(const AttestVerifyInput& in) {
  auto bytes = ReadFile(in.quote_path);
  if (!bytes.ok()) return Fail(kAttestIoError, std::string(bytes.status().message()));
  tdx::Policy policy;
  if (!in.policy_path.empty()) {
    auto text = ReadFile(in.policy_path);
    if (!text.ok()) return Fail(kAttestIoError, std::string(text.status().message()));
    auto p = tdx::Policy::FromJson(*text);
    if (!p.ok()) {
      return Fail(kAttestUsage, in.policy_path + ": " + std::string(p.status().message()));
    }
    policy = std::move(*p);
  }
  std::shared_ptr<tdx::CollateralStore> store;
  if (!in.collateral_path.empty()) {
    auto s = tdx::CollateralStore::Open(in.collateral_path);
    if (!s.ok()) {
      return Fail(s.status().code() == absl::StatusCode::kInvalidArgument ? kAttestNotAuthentic
                                                                          : kAttestIoError,
                  std::string(s.status().message()));
    }
    store = std::move(*s);
  }
  auto quote = tdx::ParseQuote(*bytes);
  if (!quote.ok()) {
    if (in.json) {
      Json j = {{"verdict", "refused"},
                {"reason", std::string(quote.status().message())}};
      return {kAttestNotAuthentic, j.dump(2) + "\n"};
    }
    return {kAttestNotAuthentic, "Quote: " + std::string(quote.status().message()) +
                                     "\nVerdict: refused\n"};
  }
  auto verifier = tdx::QuoteVerifier::Create(tdx::kIntelSgxRootCaPem);
  if (!verifier.ok()) return Fail(kAttestIoError, std::string(verifier.status().message()));
  tdx::Appraisal a = tdx::AppraiseWithStore(*quote, *verifier, store.get(), policy,
                                            /*expected_report_data=*/nullptr, in.at);
  Json j = AppraisalJson(*quote, a);
  j["verified_at"] = Utc(in.at);
  return {ExitCodeFor(a), in.json ? j.dump(2) + "\n" : AppraisalText(j)};
}

absl::StatusOr<std::string> AttestQuote(const std::array<uint8_t, 64>& report_data,
                                        tdx::ConfigfsTsmOptions options) {
  tdx::ConfigfsTsmQuoteProvider provider(std::move(options));
  auto blob = provider.GetQuote(report_data);
  if (!blob.ok()) return blob.status();
  auto quote = tdx::ParseQuote(*blob);
  if (!quote.ok()) {
    return absl::InternalError("configfs-tsm returned an unusable quote: " +
                               std::string(quote.status().message()));
  }
  if (quote->body.report_data != report_data) {
    return absl::InternalError("configfs-tsm returned a quote for other report data");
  }
  return blob->substr(0, quote->length);
}

int AttestCommand(int argc, char** argv) {
  if (argc < 3) return Usage("missing subcommand (verify or quote)");
  std::string sub = argv[2];
  if (sub == "verify") return VerifyMain(argc, argv);
  if (sub == "quote") return QuoteMain(argc, argv);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    Usage("subcommands: verify, quote");
    return 0;
  }
  return Usage("unknown subcommand '" + sub + "' (verify or quote)");
}

}  // namespace gputravel
