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

}  // namespace udf
