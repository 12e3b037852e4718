#include "keyxfer/example_sections.h"

#include <string>

namespace gputravel {

nlohmann::json WithPlaceholdersFilled(nlohmann::json section) {
  for (nlohmann::json* pins : {&section["tdx"]["peer_policy"], &section["peer_rtmr3"]}) {
    for (auto it = pins->begin(); it != pins->end(); ++it) {
      if (!it.value().is_array()) continue;
      for (nlohmann::json& entry : it.value()) {
        if (entry.is_string() && entry.get<std::string>().rfind("REPLACE-WITH-", 0) == 0) {
          entry = std::string(96, 'a');
        }
      }
    }
  }
  return section;
}

}  // namespace gputravel
