// Files: whole-file reads and atomic writes (temp file in the same folder + rename).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf {

using Bytes = std::vector<std::uint8_t>;

/// Reads a whole file; "-" reads standard input.  Errors name the path.
Expected<Bytes> read_file(const std::string& path);

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
    std::string tmp;
  };
  std::vector<Staged> staged_;
};

}  // namespace udf
