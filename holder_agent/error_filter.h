#ifndef GPUTRAVEL_HOLDER_AGENT_ERROR_FILTER_H_
#define GPUTRAVEL_HOLDER_AGENT_ERROR_FILTER_H_

#include <string>

#include "absl/status/status.h"

namespace gputravel {

// The holder's errors as the orchestrator gets them. An error names what the
// holder's own log needs (its dataset file, its bounce ring in the shared
// memory directory, the GPU's complaint about that ring, a configfs path);
// the orchestrator passes trip errors on to operators and schedulers, who
// should learn nothing about the holder's file system. So:
//  - "dataset DATASET_PATH" becomes "dataset 'DATASET_NAME'" (the name the
//    campaign uses for it);
//  - every other absolute path (a '/' that starts the message or follows a
//    space, a quote, '(', '=' or ':') becomes "<holder path>", with the rest
//    of the message, code included, unchanged.
// The holder logs the original before it is filtered.
absl::Status ForOrchestrator(const absl::Status& s, const std::string& dataset_path,
                             const std::string& dataset_name);

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_ERROR_FILTER_H_
