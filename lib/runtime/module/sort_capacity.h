// The sort capacity a scan entry's shared memory is sized with (header-only,
// free of CUDA: tested on the CPU through index/schedule_plan.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

namespace udf::rt {

// A scan entry's sort capacity: its launch.sort_capacity, which modules
// record and which the module and kernel pack readers accept only as a
// kernel pack's rule gives it for the entry's k_max (sort_capacities_for,
// udf/artifact/module.h).  A module without one was linked under the older
// rule, 2 * max(k_max, 128): its k-32 scans address that many keys, so the
// runtime sizes them so, not by its own header.
inline std::uint32_t scan_sort_capacity(const std::map<std::string, std::int64_t>& launch, std::uint32_t k_max) {
  const auto it = launch.find("sort_capacity");
  if (it != launch.end()) return static_cast<std::uint32_t>(it->second);
  return 2u * std::max<std::uint32_t>(k_max, 128u);
}

}  // namespace udf::rt
