#include "tool_cache.h"

#include <fmt/format.h>

namespace udf::detail {

ToolCache::ToolCache(std::string tool, bool disabled, const std::optional<std::string>& dir,
                     std::vector<Diagnostic>& warnings)
    : tool_(std::move(tool)), warnings_(warnings) {
  if (disabled) return;
  auto opened = Cache::open(dir);
  if (opened) cache_ = std::move(*opened);
  else warnings_.push_back(Diagnostic(opened.error().diagnostics().front().code == DiagCode::Environment
                                          ? DiagCode::Environment
                                          : DiagCode::CacheUnavailable,
                                      "cache disabled: " + opened.error().message()));
}

std::optional<Bytes> ToolCache::lookup(const std::string& key, const std::function<bool(const Bytes&)>& valid,
                                       std::string& verbose_log) {
  if (!cache_.enabled()) return std::nullopt;
  CacheCorruption corrupt;
  auto hit = cache_.get(key, &corrupt);
  if (!hit) {
    warnings_.push_back(Diagnostic(DiagCode::CacheIo, "cache read failed: " + hit.error().message()));
    return std::nullopt;
  }
  if (!corrupt.path.empty())
    verbose_log += fmt::format("{}: rebuilding corrupt cache entry {} ({})\n", tool_, corrupt.path, corrupt.reason);
  // Entries are checksummed by the cache; validating again costs little and
  // guarantees that only a valid file is ever written.
  if (!*hit || !valid(**hit)) return std::nullopt;
  return std::move(**hit);
}

void ToolCache::store(const std::string& key, std::span<const std::uint8_t> bytes) {
  if (!cache_.enabled()) return;
  if (auto put = cache_.put(key, bytes); !put)
    warnings_.push_back(Diagnostic(DiagCode::CacheIo, "cache write failed: " + put.error().message()));
}

}  // namespace udf::detail
