// A module entry's launch parameters as the runtime reads them (header-only,
// free of CUDA): a value or its default, a flag, a scan's recommendation.
#pragma once

#include <cstdint>
#include <string>

#include "udf/artifact/module.h"

namespace udf::rt {

/// The entry's launch parameter `key`, `none` where it has none.
inline std::int64_t launch_value(const ModuleEntry& e, const std::string& key, std::int64_t none = 0) {
  const auto it = e.launch.find(key);
  return it == e.launch.end() ? none : it->second;
}

/// Whether the entry's launch parameter `key` is 1 (a flag; absent is 0).
inline bool launch_flag(const ModuleEntry& e, const std::string& key) { return launch_value(e, key) == 1; }

/// A scan's queries an item as its kernel pack recommends them: 8 in a
/// module that does not say.
inline int recommended_queries_per_item(const ModuleEntry& e) {
  return static_cast<int>(launch_value(e, "recommended_queries_per_item", 8));
}

}  // namespace udf::rt
