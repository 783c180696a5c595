#include "udf/support/limits.h"

#include <fmt/format.h>

namespace udf {

std::string format_size(std::uint64_t bytes) {
  if (bytes < kKiB) return fmt::format("{} byte{}", bytes, bytes == 1 ? "" : "s");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / static_cast<double>(kKiB);
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  std::string n = fmt::format("{:.1f}", v);
  if (n.size() > 2 && n.compare(n.size() - 2, 2, ".0") == 0) n.resize(n.size() - 2);
  return n + " " + units[u];
}

Expected<void> check_file_size(const std::string& path, std::uint64_t size, const FileLimit& limit) {
  if (size <= limit.max_bytes) return {};
  std::string name = path == "-" ? std::string("standard input") : "'" + path + "'";
  return diagnosed(DiagCode::FileTooLarge,
                   fmt::format("{} is too large: {} bytes ({}), more than the {} limit for {}", name, size,
                               format_size(size), format_size(limit.max_bytes), limit.what));
}

}  // namespace udf
