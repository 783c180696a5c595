// How a tool reports its diagnostics: clang-style text, JSON lines (one
// object per diagnostic) or one SARIF 2.1.0 log, for people, scripts and
// code-scanning UIs.  Renderers only; tools/common/tool_main.h decides where
// the text goes (standard error or --diagnostics-file).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "udf/support/error.h"

namespace udf {

enum class DiagFormat { Text, Json, Sarif };

/// "text", "json" or "sarif"; nothing otherwise.
std::optional<DiagFormat> parse_diag_format(std::string_view s);

enum class Severity { Error, Warning };

/// One run's diagnostics, in the order reported.
class DiagnosticLog {
 public:
  explicit DiagnosticLog(std::string tool, std::string version) : tool_(std::move(tool)), version_(std::move(version)) {}

  void add(Severity s, const Diagnostic& d) { entries_.push_back({s, d}); }
  void add_all(Severity s, const std::vector<Diagnostic>& ds) {
    for (const auto& d : ds) add(s, d);
  }
  bool empty() const { return entries_.empty(); }

  /// `file:line:col: error: message [UDF1001]` and `note:` lines, as clang
  /// and lld print them; without a location the tool's name leads.
  std::string text() const;
  /// One JSON object per line: {"tool", "severity", "code", "file", "line",
  /// "column", "message", "notes"} (file/line/column null when unknown).
  std::string json_lines() const;
  /// A SARIF 2.1.0 log with one run: the tool, the rules (codes) used, the
  /// results, and the invocation's exit code.  Relative paths are relative
  /// to `working_dir` (%SRCROOT%).
  std::string sarif(int exit_code, const std::string& working_dir) const;

  std::string render(DiagFormat f, int exit_code, const std::string& working_dir) const;

 private:
  struct Entry {
    Severity severity;
    Diagnostic diag;
  };
  std::string tool_;
  std::string version_;
  std::vector<Entry> entries_;
};

/// A path as a URI reference (RFC 3986): absolute paths as file:///...,
/// relative ones percent-encoded and left relative.
std::string path_to_uri(const std::string& path);

}  // namespace udf
