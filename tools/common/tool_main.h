// What every udf command-line tool does the same way: expand response files
// (@FILE), take GCC's -MD/-MF/-MT/-MP, parse with CLI11, run the driver,
// report its diagnostics as text, JSON lines or SARIF (--diagnostics-format,
// --diagnostics-file), map results to exit codes (0 ok, 1 diagnosed, 2 usage,
// 3 internal), and never let an exception escape.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "udf/support/cmdline.h"
#include "udf/support/depfile.h"
#include "udf/support/diagnostics.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"
#include "udf/support/version.h"

// ASan builds: NVIDIA's libraries' and LLVM's memory kept until exit is not
// a leak of ours (cmake/UdfSanitizers.cmake; one definition per tool, since
// each tool's main file is the only one that includes this header).
#ifdef UDF_LSAN_SUPPRESSIONS_INC
extern "C" const char* __lsan_default_suppressions() {
  return
#include UDF_LSAN_SUPPRESSIONS_INC
      ;
}
#endif

namespace udf::tool {

/// What a tool is, for the ladder.
struct ToolSpec {
  std::string name;                          // "udfc"
  std::string description;                   // the first line of --help
  bool dependency_flags = false;             // takes -MD -MF -MT -MP
  std::function<std::string()> version;      // --version text (tool and CUDA library versions)
};

/// Options every tool takes, bound by add_common_options().
struct CommonOptions {
  std::string diagnostics_format = "text";
  std::optional<std::string> diagnostics_file;
  bool verbose = false;
};

/// Where diagnostics go: standard error, or a file written when the run ends.
class Reporter {
 public:
  Reporter(std::string tool, DiagFormat format, std::optional<std::string> file)
      : tool_(std::move(tool)), format_(format), file_(std::move(file)), log_(tool_, kUdfVersion) {
    std::error_code ec;
    cwd_ = std::filesystem::current_path(ec).string();
    if (ec) cwd_.clear();
  }

  void errors(const Error& e) {
    log_.add_all(Severity::Warning, e.warnings());
    const auto& ds = e.diagnostics();
    for (std::size_t i = 0; i < ds.size(); ++i) {
      Diagnostic d = ds[i];
      // A usage error ends with a pointer to --help, once.
      if (e.kind() == ErrorKind::Usage && i + 1 == ds.size()) d.notes.push_back("run '" + tool_ + " --help' for usage");
      log_.add(Severity::Error, d);
    }
  }
  void warnings(const std::vector<Diagnostic>& ws) { log_.add_all(Severity::Warning, ws); }

  /// Writes the diagnostics and returns the exit code (1 if they could not
  /// be written to --diagnostics-file and the run had succeeded).
  /// Relative paths are taken from the folder the tool started in (a
  /// watchdog may call this while a compile runs in another).
  int finish(int code) {
    if (format_ == DiagFormat::Text && log_.empty() && !file_) return code;
    std::string text = log_.render(format_, code, cwd_);
    if (!file_) {
      std::cerr << text << std::flush;
      return code;
    }
    std::string path = *file_;
    std::error_code ec;
    if (!path.empty() && path.front() != '/' && !cwd_.empty() && std::filesystem::current_path(ec).string() != cwd_)
      path = cwd_ + "/" + path;
    if (auto w = write_file_atomic(path, text); !w) {
      std::cerr << w.error().render(tool_) << log_.text() << std::flush;
      return code == 0 ? 1 : code;
    }
    return code;
  }

 private:
  std::string tool_;
  DiagFormat format_;
  std::optional<std::string> file_;
  std::string cwd_;  // where the tool started; empty if unknown
  DiagnosticLog log_;
};

inline void add_common_options(CLI::App& app, CommonOptions& o, const ToolSpec& spec) {
  app.add_option("--diagnostics-format", o.diagnostics_format,
                 "how errors and warnings are reported: text (default), json (one object per line) or sarif (SARIF 2.1.0)")
      ->type_name("text|json|sarif");
  app.add_option("--diagnostics-file", o.diagnostics_file, "write the diagnostics to FILE instead of standard error")
      ->type_name("FILE");
  app.add_flag("-v,--verbose", o.verbose, "print the libraries' raw logs, what was done and where the time went");
  app.set_version_flag("--version", spec.version, "print the tool's version and the CUDA libraries it found, and exit");
}

/// --compile-timeout and --compile-memory-limit (udf/support/watchdog.h), for
/// tools that compile or link.
inline void add_compile_limit_options(CLI::App& app, std::optional<std::string>& timeout,
                                      std::optional<std::string>& memory) {
  app.add_option("--compile-timeout", timeout,
                 "stop a compile or link that runs longer than SECONDS (default $UDF_COMPILE_TIMEOUT or 300; 0: no limit)")
      ->type_name("SECONDS");
  app.add_option("--compile-memory-limit", memory,
                 "stop a compile or link once the tool uses more than MiB of memory (default $UDF_COMPILE_MEMORY_LIMIT "
                 "or 8192; 0: no limit)")
      ->type_name("MiB");
}

/// The dependency-file flags (-MD -MF -MT -MP, rewritten for CLI11 by
/// rewrite_dependency_flags) for tools that write one.
inline void add_depfile_options(CLI::App& app, DepfileOptions& d) {
  app.add_flag("--MD", d.enabled, "-MD: also write a Make-syntax depfile listing every file read (default OUTPUT.d)");
  app.add_option("--MF", d.path, "-MF FILE: the depfile's path")->type_name("FILE");
  app.add_option("--MT", d.target, "-MT TARGET: the depfile's target (default: the output as given)")->type_name("TARGET");
  app.add_flag("--MP", d.phony_targets, "-MP: add an empty rule for every dependency (for Make)");
}

namespace detail {

// The run's reporter while the driver runs, for exit_with_error.
inline std::atomic<Reporter*> active_reporter{nullptr};

// The last --diagnostics-format / --diagnostics-file in `args`, looked for
// before parsing so that even a usage error is reported as asked.
inline void prescan(const std::vector<std::string>& args, std::string& format, std::optional<std::string>& file) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    for (auto [flag, set] : {std::pair<const char*, int>{"--diagnostics-format", 0}, {"--diagnostics-file", 1}}) {
      std::string f = flag;
      std::optional<std::string> v;
      if (a == f && i + 1 < args.size()) v = args[i + 1];
      else if (a.rfind(f + "=", 0) == 0) v = a.substr(f.size() + 1);
      if (!v) continue;
      if (set == 0) format = *v;
      else file = *v;
    }
  }
}

}  // namespace detail

/// The body of a tool's main().  `define` adds the tool's own options to an
/// app, bound into a fresh config; `more_args` (may be empty), called after
/// parsing, returns arguments to append -- udfc's first-line flags -- and the
/// command line is then parsed again with them; `run` calls the driver and
/// returns a result with `out` (standard output), `warnings` and
/// `verbose_log`; `after` (optional) runs on success before the output is
/// printed.  `common` receives the options every tool takes.
template <class Result>
int run_tool(const ToolSpec& spec, int argc, char** argv, const std::function<void(CLI::App&)>& define,
             const std::function<Expected<std::vector<std::string>>()>& more_args,
             const std::function<Expected<Result>()>& run, const std::function<void(const Result&)>& after = {},
             CommonOptions* common_out = nullptr) {
  std::vector<std::string> raw(argv + 1, argv + argc);
  std::string format_name = "text";
  std::optional<std::string> file;
  detail::prescan(raw, format_name, file);

  auto expanded = expand_response_files(raw);
  std::vector<std::string> args;
  if (expanded) {
    args = spec.dependency_flags ? rewrite_dependency_flags(*expanded) : *expanded;
    detail::prescan(args, format_name, file);
  }
  auto format = parse_diag_format(format_name);
  if (!format) {
    std::cerr << spec.name << ": error: unknown --diagnostics-format '" << format_name
              << "' (choose text, json, sarif) [UDF0002]\nnote: run '" << spec.name << " --help' for usage\n";
    return 2;
  }
  Reporter report(spec.name, *format, file);
  if (!expanded) {
    report.errors(expanded.error());
    return report.finish(expanded.error().exit_code());
  }

  CommonOptions own_common;
  CommonOptions& common = common_out ? *common_out : own_common;
  // Parses `a` into a fresh app; an exit code when the run ends here.
  auto parse = [&](std::vector<std::string> a) -> std::optional<int> {
    CLI::App app{spec.description, spec.name};
    common = {};
    define(app);
    add_common_options(app, common, spec);
    std::reverse(a.begin(), a.end());  // CLI11 takes them last first
    try {
      app.parse(a);
    } catch (const CLI::CallForHelp&) {
      std::cout << app.help();
      return 0;
    } catch (const CLI::CallForVersion& v) {
      std::cout << v.what() << std::flush;
      return 0;
    } catch (const CLI::ParseError& e) {
      report.errors(usage_error(e.what()));
      return report.finish(2);
    }
    return std::nullopt;
  };
  if (auto code = parse(args)) return *code;
  if (more_args) {
    auto extra = more_args();
    if (!extra) {
      report.errors(extra.error());
      return report.finish(extra.error().exit_code());
    }
    if (!extra->empty()) {
      auto all = args;
      all.insert(all.end(), extra->begin(), extra->end());
      if (auto code = parse(spec.dependency_flags ? rewrite_dependency_flags(all) : all)) return *code;
    }
  }

  detail::active_reporter = &report;
  auto r = run();
  detail::active_reporter = nullptr;
  if (!r) {
    if (common.verbose && !r.error().raw_log().empty()) std::cerr << r.error().raw_log() << "\n";
    report.errors(r.error());
    return report.finish(r.error().exit_code());
  }
  report.warnings(r->warnings);
  if (common.verbose) std::cerr << r->verbose_log;
  if (after) after(*r);
  std::cout << r->out << std::flush;
  if (!std::cout) {
    report.errors(diagnosed(DiagCode::WriteFailed, "cannot write to standard output"));
    return report.finish(1);
  }
  return report.finish(0);
}

/// Reports `e` as the run's error, as the command line asked, and ends the
/// process with its exit code at once, from any thread: a tool's handler for
/// a compile watchdog (udf/support/watchdog.h), whose compile cannot be
/// stopped otherwise.  The driver writes its outputs only after the compile,
/// so none is left half-written.
[[noreturn]] inline void exit_with_error(const std::string& tool, const Error& e) {
  static std::mutex once;
  once.lock();  // never unlocked: one report, one exit
  int code = e.exit_code();
  if (Reporter* r = detail::active_reporter.load()) {
    r->errors(e);
    code = r->finish(code);
  } else {
    std::cerr << e.render(tool);
  }
  std::cout.flush();
  std::cerr.flush();
  ::_exit(code);
}

/// main(): an exception that escapes is an internal error (exit 3).
inline int guarded_main(const std::string& tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << tool << ": internal error: " << e.what() << " [UDF9001]\n";
  } catch (...) {
    std::cerr << tool << ": internal error: unknown exception [UDF9001]\n";
  }
  return 3;
}

}  // namespace udf::tool
