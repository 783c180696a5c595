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

  /// On a hit whose bytes pass `valid`, writes them atomically to `output`
  /// and returns true.  A corrupt entry is reported in `verbose_log` and the
  /// caller rebuilds it.
  Expected<bool> serve(const std::string& key, const std::function<bool(const Bytes&)>& valid, const std::string& output,
                       std::string& verbose_log);

  /// Stores a freshly built result.
  void store(const std::string& key, std::span<const std::uint8_t> bytes);

 private:
  std::string tool_;
  Cache cache_ = Cache::disabled();
  std::vector<Diagnostic>& warnings_;
};

}  // namespace udf::detail
