#include "udf/support/depfile.h"

#include <algorithm>
#include <filesystem>
#include <set>

namespace udf {

std::string escape_make_path(const std::string& path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == ' ' || c == '\t') {
      // Backslashes before the space are doubled, then the space is escaped.
      for (std::size_t j = i; j > 0 && path[j - 1] == '\\'; --j) out += '\\';
      out += '\\';
      out += c;
    } else if (c == '$') {
      out += "$$";
    } else if (c == '#') {
      out += "\\#";
    } else {
      out += c;
    }
  }
  return out;
}

Expected<std::string> make_depfile(const std::string& target, const std::vector<std::string>& deps, bool phony_targets) {
  auto check = [](const std::string& p) -> Expected<void> {
    if (p.find('\n') != std::string::npos || p.find('\r') != std::string::npos)
      return diagnosed(DiagCode::WriteFailed, "cannot write a depfile naming '" + p + "': the path holds a line break");
    return {};
  };
  UDF_TRY_VOID(check(target));
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const auto& d : deps) {
    UDF_TRY_VOID(check(d));
    if (seen.insert(d).second) unique.push_back(d);
  }
  std::string out = escape_make_path(target) + ":";
  for (const auto& d : unique) out += " \\\n  " + escape_make_path(d);
  out += "\n";
  if (phony_targets)
    for (const auto& d : unique) out += "\n" + escape_make_path(d) + ":\n";
  return out;
}

void DependencyList::add(const std::string& path) {
  if (path.empty() || path == "-") return;
  std::error_code ec;
  std::string p = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) p = path;
  if (std::find(paths_.begin(), paths_.end(), p) == paths_.end()) paths_.push_back(p);
}

}  // namespace udf
