// What every udf command-line tool does the same way: parse with CLI11,
// print diagnostics and warnings, map results to exit codes (0 ok, 1
// diagnosed, 2 usage, 3 internal), and never let an exception escape.
#pragma once

#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "udf/support/error.h"
#include "udf/support/version.h"

namespace udf::tool {

/// Parses argv.  Returns an exit code when the run ends here: 0 after
/// --help/--version, 2 on a usage error (never CLI11's own codes).
inline std::optional<int> parse(CLI::App& app, const std::string& tool, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << tool << " " << kUdfVersion << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << tool << ": error: " << e.what() << "\nnote: run '" << tool << " --help' for usage\n";
    return 2;
  }
  return std::nullopt;
}

inline void print_warnings(const std::string& tool, const std::vector<Diagnostic>& ws) {
  for (const auto& w : ws) {
    std::string loc = w.file.empty() ? tool : w.file;
    if (w.line > 0) loc += ":" + std::to_string(w.line) + (w.column > 0 ? ":" + std::to_string(w.column) : "");
    std::cerr << loc << ": warning: " << w.message << "\n";
  }
}

/// Reports a driver result (a struct with `out`, `warnings`, `verbose_log`)
/// and returns the exit code.
template <class Result>
int finish(const std::string& tool, const Expected<Result>& r, bool verbose) {
  if (!r) {
    if (verbose && !r.error().raw_log().empty()) std::cerr << r.error().raw_log() << "\n";
    std::cerr << r.error().render(tool);
    if (r.error().kind() == ErrorKind::Usage) std::cerr << "note: run '" << tool << " --help' for usage\n";
    return r.error().exit_code();
  }
  print_warnings(tool, r->warnings);
  if (verbose) std::cerr << r->verbose_log;
  std::cout << r->out << std::flush;
  if (!std::cout) {
    std::cerr << tool << ": error: cannot write to standard output\n";
    return 1;
  }
  return 0;
}

/// The body of main(): an exception that escapes is an internal error (exit 3).
inline int guarded_main(const std::string& tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << tool << ": internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << tool << ": internal error: unknown exception\n";
  }
  return 3;
}

}  // namespace udf::tool
