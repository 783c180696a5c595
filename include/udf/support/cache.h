// The shared on-disk content-addressed cache of udfc and udf-link.
//
// Keys are lowercase hex SHA-256 strings that callers compute (with
// Sha256Builder) from everything that determines the value: input bytes,
// options, tool and library versions.  Values are arbitrary bytes.  Every
// entry carries a checksum, so a corrupt or truncated entry reads as a miss
// (and is deleted) and never as wrong bytes.  Writes are atomic (temp file,
// fsync, rename); reads and writes take no lock; eviction keeps the total
// under a size bound.  See docs/cache.md.
//
// Errors: a put error means "not cached" and callers report it as a warning;
// open errors likewise (fall back to Cache::disabled()).  A get error (other
// than corruption, which is a miss) is an Error naming the path.
//
// Many processes may share one folder.  One Cache object is for one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

/// Counters of one Cache object (this process's activity, not the folder's).
struct CacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;            // corrupt entries included
  std::uint64_t corrupt = 0;           // entries found corrupt, and removed
  std::uint64_t puts = 0;              // values stored
  std::uint64_t put_bytes = 0;         // value bytes stored
  std::uint64_t skipped_puts = 0;      // values larger than the bound, not stored
  std::uint64_t evictions = 0;         // eviction passes run by this object
  std::uint64_t evicted_entries = 0;
  std::uint64_t evicted_bytes = 0;
};

/// What one eviction pass found and did.  Sizes are entry file sizes.
struct EvictStats {
  bool ran = false;                    // false: disabled cache, or another process held the lock
  std::uint64_t entries_before = 0;
  std::uint64_t bytes_before = 0;
  std::uint64_t entries_removed = 0;
  std::uint64_t bytes_removed = 0;
  std::uint64_t bytes_after = 0;
  std::uint64_t temp_files_removed = 0;  // stale temp files of killed writers
};

/// Why a get missed on an entry that was there.
struct CacheCorruption {
  std::string path;
  std::string reason;
};

class Cache {
 public:
  /// Default size bound: 1 GiB.
  static constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{1} << 30;
  /// Eviction brings the total down to this fraction (in percent) of the bound.
  static constexpr std::uint64_t kEvictTargetPercent = 80;
  /// Temp files older than this (seconds) are taken for leftovers of killed writers.
  static constexpr std::int64_t kStaleTempSeconds = 3600;
  /// An entry file's header size in bytes (see docs/cache.md).
  static constexpr std::size_t kHeaderSize = 88;

  /// Opens (creating it if needed) the cache in `dir`, else `$UDF_CACHE_DIR`,
  /// else `$XDG_CACHE_HOME/udf` (absolute paths only), else `$HOME/.cache/udf`.
  /// The bound is `$UDF_CACHE_MAX_BYTES` (an integer with an optional K, M, G
  /// or T suffix, powers of 1024) or kDefaultMaxBytes.  Errors name the path
  /// or the variable.
  static Expected<Cache> open(std::optional<std::string> dir = {});

  /// A cache that always misses and never writes (for --no-cache, or when the
  /// real one cannot be opened).
  static Cache disabled();

  /// The memo cache beside the one in `dir` (else as open() finds it): the same format in
  /// `<dir>/memo`, for remembered() (library versions, the kernel pack's manifest), so that they never
  /// mix with (or count as) the tools' outputs.  Disabled when it cannot be opened.
  static Cache memo(const std::optional<std::string>& dir = {});

  /// The folder open() uses when given none (from the environment, as above).
  static Expected<std::string> default_dir();

  /// Whether `key` is a 64-character lowercase hex string.
  static bool is_valid_key(std::string_view key);

  /// The value stored under `key_hex`, or nullopt on a miss.  A corrupt entry
  /// is a miss: it is removed, counted in stats().corrupt and, if `corruption`
  /// is given, described there.  A hit marks the entry as recently used.
  Expected<std::optional<Bytes>> get(std::string_view key_hex, CacheCorruption* corruption = nullptr);

  /// The value in the bytes of an entry file (header + value) read for
  /// `key_hex`, checked as get() checks the file it reads; a corrupt entry is
  /// an error whose message says why (get's CacheCorruption::reason).
  static Expected<Bytes> parse_entry(std::span<const std::uint8_t> entry, std::string_view key_hex);

  /// Stores `value` under `key_hex` atomically, replacing any entry there.
  /// May run an eviction pass afterwards.  Errors mean "not stored" (or, if
  /// the eviction pass after it failed, "stored but not evicted"): callers
  /// report them as warnings and go on.
  Expected<void> put(std::string_view key_hex, std::span<const std::uint8_t> value);
  Expected<void> put(std::string_view key_hex, std::string_view value) {
    return put(key_hex, std::span(reinterpret_cast<const std::uint8_t*>(value.data()), value.size()));
  }

  /// Changes the size bound (bytes, > 0) of this object.
  void set_max_bytes(std::uint64_t max_bytes) { max_bytes_ = max_bytes == 0 ? 1 : max_bytes; }
  std::uint64_t max_bytes() const { return max_bytes_; }

  /// Removes stale temp files and, if the entries exceed the bound, the least
  /// recently used entries down to kEvictTargetPercent of it.  Waits for an
  /// eviction of another process to finish first.
  Expected<EvictStats> evict();

  const CacheStats& stats() const { return stats_; }
  bool enabled() const { return enabled_; }
  /// `<dir>`; empty when disabled.
  const std::string& dir() const { return dir_; }
  /// The file an entry for `key_hex` lives in (`<dir>/v1/<2 hex>/<key>`); the key must be valid.
  std::string entry_path(std::string_view key_hex) const;

 private:
  Cache() = default;
  Expected<EvictStats> run_eviction(bool wait);
  Expected<void> after_put(std::uint64_t entry_bytes);

  bool enabled_ = false;
  std::string dir_;   // <dir>
  std::string vdir_;  // <dir>/v1
  std::uint64_t max_bytes_ = kDefaultMaxBytes;
  CacheStats stats_;
};

/// What compute() gives for `identity` (a file's file_identity), remembered in
/// `cache` under (`what`, identity): read back when there (a non-empty value of `size`
/// bytes, or any non-empty value when size is 0), else computed; compute sets `keep` to
/// false for an answer not to remember.  Empty identity or disabled cache: computed.
/// Cache errors are misses: this never fails.
std::string remembered(Cache& cache, std::string_view what, const std::string& identity,
                       const std::function<std::string(bool& keep)>& compute, std::size_t size = 0);

/// Test hooks; not for tools.
namespace cache_testing {
/// Called by put after the temp file is written and synced, before the rename.
void set_before_rename_hook(std::function<void(const std::string& temp_path)> hook);
}  // namespace cache_testing

}  // namespace udf
