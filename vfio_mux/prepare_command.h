#ifndef GPUTRAVEL_VFIO_MUX_PREPARE_COMMAND_H_
#define GPUTRAVEL_VFIO_MUX_PREPARE_COMMAND_H_

namespace gputravel {

// `vfio_mux prepare`: readies the host for one GPU with the MUX's own sysfs
// code (PrepareGpuForVfio), after checking the IOMMU and loading vfio-pci;
// deploy/host/prepare_host.sh runs it. argv[0] is "prepare". Returns the exit
// status: 0 prepared (or, with --dry_run, would be), 1 a check or step
// failed, 2 bad usage. Output on stdout, warnings and errors on stderr.
int RunPrepareCommand(int argc, char** argv);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_PREPARE_COMMAND_H_
