// Make-syntax dependency files (`gcc -MD` style) that Ninja, Make and CMake's
// add_custom_command(DEPFILE) read: which files an output was made from.
#pragma once

#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf {

/// A path escaped for a Make rule as GCC escapes it: a space or tab gets a
/// backslash (and backslashes right before it are doubled), '#' becomes \#
/// and '$' becomes $$.
std::string escape_make_path(const std::string& path);

/// "TARGET: DEP1 \\\n DEP2 ...\n"; with `phony_targets`, also an empty rule
/// per dependency (gcc -MP), so that a deleted header does not break Make.
/// Dependencies are written once each, in the order given.  A path holding a
/// newline cannot be written in Make syntax: that is an error naming it.
Expected<std::string> make_depfile(const std::string& target, const std::vector<std::string>& deps, bool phony_targets);

/// What -MD/-MF/-MT/-MP asked for; `enabled` once -MD is given.
struct DepfileOptions {
  bool enabled = false;           // -MD
  std::string path;               // -MF (default: OUTPUT.d)
  std::string target;             // -MT (default: the output as given)
  bool phony_targets = false;     // -MP
};

/// Collects the files a tool reads, made absolute and lexically normal
/// (relative to the working folder), without repeats.
class DependencyList {
 public:
  void add(const std::string& path);
  void add_all(const std::vector<std::string>& paths) {
    for (const auto& p : paths) add(p);
  }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::string> paths_;
};

}  // namespace udf
