// Private to lib/driver: how udfc and udf-link use the on-disk cache.  A
// cache that cannot be opened, read or written costs a warning, never the run.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "udf/support/cache.h"

namespace udf::detail {

class ToolCache {
 public:
  /// Opens the cache unless `disabled`; a failure becomes a warning.
  ToolCache(std::string tool, bool disabled, const std::optional<std::string>& dir, std::vector<Diagnostic>& warnings);

  /// The entry's bytes on a hit that passes `valid`, else nothing (the
  /// caller builds it).  A corrupt entry is reported in `verbose_log`.
  std::optional<Bytes> lookup(const std::string& key, const std::function<bool(const Bytes&)>& valid,
                              std::string& verbose_log);

  /// Stores a freshly built result.
  void store(const std::string& key, std::span<const std::uint8_t> bytes);

 private:
  std::string tool_;
  Cache cache_ = Cache::disabled();
  std::vector<Diagnostic>& warnings_;
};

}  // namespace udf::detail
