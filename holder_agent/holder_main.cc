// holder_agent: the data holder's agent inside its TD.
#include <cstdio>

#include "grpcpp/grpcpp.h"
#include "holder_agent/dataset.h"
#include "holder_agent/holder_service.h"
#include "keyxfer/attestation_config.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/flags.h"
#include "util/log.h"

namespace gputravel {
namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "holder_agent: %s\n", msg.c_str());
  return 2;
}

int Run(int argc, char** argv) {
  Flags flags("holder_agent",
              "Data-holder agent: attests its TD to the orchestrator, accepts one\n"
              "hand-off per trip and provisions its dataset window onto the GPU\n"
              "over the encrypted copy-engine path.\n"
              "Config JSON: {\"name\", \"domain\", \"listen\" (unix:PATH or\n"
              "HOST:PORT), \"dataset\": {\"path\", \"format\": auto|llmc-tokens|raw},\n"
              "\"device_endpoint\", \"threads\", \"bounce_slots\", \"bounce_dir\",\n"
              "\"attestation\": {...}} (see docs/operations.md).");
  flags.String("config", "", "Path of the holder configuration (JSON).");
  flags.String("ready_file", "", "File written once the agent serves.");
  flags.String("v", "1", "Log verbosity: 0 errors, 1 info, 2 debug, 3 trace.");
  absl::Status ps = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!ps.ok()) return Fail(std::string(ps.message()));
  if (flags.Get("config").empty()) return Fail("--config is required (see --help)");
  SetLogLevel(flags.GetInt("v"));
  BlockTerminationSignals();
  const std::string where = flags.Get("config");
  auto cfg = ReadJsonFile(where);
  if (!cfg.ok()) return Fail(std::string(cfg.status().message()));
  HolderOptions opts;
  auto name = JsonString(*cfg, where, "name");
  auto domain = JsonString(*cfg, where, "domain");
  auto listen = JsonString(*cfg, where, "listen");
  auto device = JsonString(*cfg, where, "device_endpoint");
  for (const absl::Status& s : {name.status(), domain.status(), listen.status(), device.status()}) {
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  opts.name = *name;
  opts.domain = *domain;
  opts.device_endpoint = *device;
  if (cfg->contains("threads")) {
    auto t = JsonUint(*cfg, where, "threads");
    if (!t.ok() || *t == 0 || *t > 64) return Fail(where + ": 'threads' must be 1..64");
    opts.writer.threads = static_cast<int>(*t);
  }
  if (cfg->contains("bounce_slots")) {
    auto t = JsonUint(*cfg, where, "bounce_slots");
    if (!t.ok() || *t == 0 || *t > 64) return Fail(where + ": 'bounce_slots' must be 1..64");
    opts.writer.slots = static_cast<uint32_t>(*t);
  }
  if (cfg->contains("bounce_dir")) {
    auto d = JsonString(*cfg, where, "bounce_dir");
    if (!d.ok()) return Fail(std::string(d.status().message()));
    opts.writer.bounce_dir = *d;
  }
  if (!cfg->contains("dataset") || !(*cfg)["dataset"].is_object()) {
    return Fail(where + ": missing object 'dataset' ({\"path\", \"format\"})");
  }
  const auto& ds = (*cfg)["dataset"];
  auto ds_path = JsonString(ds, where + ": dataset", "path");
  if (!ds_path.ok()) return Fail(std::string(ds_path.status().message()));
  std::string fmt = ds.contains("format") && ds["format"].is_string()
                        ? ds["format"].get<std::string>() : "auto";
  auto dataset = Dataset::Open(*ds_path, fmt);
  if (!dataset.ok()) return Fail(std::string(dataset.status().message()));
  if (!cfg->contains("attestation")) return Fail(where + ": missing object 'attestation'");
  auto att = MakeAttestationFromConfig((*cfg)["attestation"], where + ": attestation",
                                       opts.domain);
  if (!att.ok()) return Fail(std::string(att.status().message()));
  SetLogPrefix("holder " + opts.name);
  GT_LOG(1, "dataset ", *ds_path, " (", (*dataset)->format(), ", ",
         (*dataset)->payload_bytes(), " bytes), attestation backend ", att->backend);

  HolderService service(opts, std::move(*dataset), att->attester.get(),
                        att->verifier.get());
  if (listen->rfind("unix:", 0) == 0) {
    absl::Status s = PrepareUnixSocketPath(listen->substr(5));
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  grpc::ServerBuilder b;
  b.AddListeningPort(*listen, grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server) return Fail("cannot listen on " + *listen);
  GT_LOG(1, "serving on ", *listen);
  AnnounceReady(flags.Get("ready_file"));
  int sig = WaitForTerminationSignal();
  GT_LOG(1, "signal ", sig, ": shutting down");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ExitAfterShutdown(0);
}

}  // namespace
}  // namespace gputravel

int main(int argc, char** argv) { return gputravel::Run(argc, argv); }
