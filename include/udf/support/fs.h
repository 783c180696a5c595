// Files: whole-file reads and atomic writes (temp file in the same folder + rename).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"
#include "udf/support/limits.h"

namespace udf {

using Bytes = std::vector<std::uint8_t>;

/// Reads a whole file; "-" reads standard input.  Errors name the path.  A
/// file larger than `limit` is refused (UDF3007) from its size before
/// anything is allocated or read; standard input and other streams without
/// a size are refused once they pass the limit.
Expected<Bytes> read_file(const std::string& path, const FileLimit& limit = limits::kAnyFile);

/// The first `max_bytes` bytes of a file (all of it when it is shorter).
Expected<Bytes> read_file_head(const std::string& path, std::size_t max_bytes);

/// Writes `data` to `path` atomically: a temporary file beside it is written,
/// flushed to disk and renamed over `path`.  On any failure `path` is left as
/// it was and the temporary file is removed.
Expected<void> write_file_atomic(const std::string& path, std::span<const std::uint8_t> data);

inline Expected<void> write_file_atomic(const std::string& path, const std::string& text) {
  return write_file_atomic(path, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

/// Several outputs written all or nothing (an artifact and its depfile, say):
/// stage() writes each to a temporary file beside its target and flushes it;
/// only when every one is staged does commit() rename them into place, in
/// the order staged.  Whatever is not committed is removed by the destructor,
/// so a failure leaves every target as it was.
///
/// The temporary file is unnamed (O_TMPFILE) where the filesystem allows it:
/// a process killed before commit() leaves nothing.  commit() links it under
/// a name `.TARGET.tmp.PID.XXXXXX` and renames that onto the target, so only a
/// kill between those two calls can leave a named temporary; stage() removes
/// such leftovers of dead processes beside its target (remove_stale_temps).
///
/// A target that already holds exactly the bytes (a regular file of one name,
/// ours, with a new file's permissions) is not written again: commit() sets
/// its modification time to now, as a rewrite would, and leaves it in place.
class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  Expected<void> stage(const std::string& path, std::span<const std::uint8_t> data);
  Expected<void> stage(const std::string& path, const std::string& text) {
    return stage(path, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }
  Expected<void> commit();

 private:
  struct Staged {
    std::string path;
    std::string tmp;  // the named temporary, or "" while it is unnamed
    int fd = -1;      // the unnamed temporary's descriptor (or the unchanged target's), or -1
    bool unchanged = false;  // the target already holds the bytes: commit() only sets its time
  };
  std::vector<Staged> staged_;
};

/// What a memo of a file's contents is keyed by (Cache::memo): the file's
/// device, inode, size, modification and status-change times (ns), which a
/// rewrite in place, a replacement (rename) or a copy over it all change.
/// Empty -- remember nothing -- when `path` is no regular file or cannot be
/// stat'ed, and when it changed less than kSettleSeconds ago: the kernel
/// stamps times from a clock that ticks every few milliseconds, so a change
/// within the same tick could keep every field.
inline constexpr int kSettleSeconds = 2;
std::string file_identity(const std::string& path);

/// Removes the entries of folder `dir` named `PREFIX<pid>.<anything>` whose
/// process `pid` no longer exists (files or folders a killed process left;
/// a live process's, and names without a pid, are kept).  Best effort.
void remove_stale_temps(const std::string& dir, const std::string& prefix);

}  // namespace udf
