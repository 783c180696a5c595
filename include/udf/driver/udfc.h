// udfc as a library call: a config struct in, files written and text out.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udf/compile/metadata.h"
#include "udf/support/depfile.h"
#include "udf/support/error.h"
#include "udf/support/watchdog.h"

namespace udf {

struct UdfcConfig {
  std::vector<std::string> inputs;           // a file, or "-" for standard input; several LTO-IR files (one per arch)
  std::optional<std::string> source_string;  // -e SOURCE
  std::optional<std::string> output;         // -o
  std::optional<std::string> inspect;        // --inspect FILE
  std::optional<std::string> input_kind;     // --input-kind; default from the extension
  std::vector<std::string> archs;            // --arch, each may be a comma list
  std::vector<std::string> include_dirs;     // -I
  std::vector<std::string> defines;          // -D
  std::optional<std::string> kind;           // --kind metric (default) | filter
  std::optional<std::string> symbol;
  std::optional<std::string> finalize;
  std::optional<std::string> abi;             // --abi v1 (default) | v2
  std::optional<std::string> shape;           // --shape state | vector (implies --abi v2)
  // Metrics only (a filter refuses them); unset: the defaults f32, min, l2.
  std::optional<std::string> elem;
  std::optional<std::string> acc;
  std::optional<std::string> order;
  std::optional<std::string> initial;
  std::optional<std::string> coarse_metric;
  bool monotone = false;                     // --monotone (ABI v1 metrics only)
  std::optional<std::string> coarse_weights; // --coarse-weights CAPTURE
  std::vector<std::string> captures;         // NAME:TYPE or NAME:TYPE[]
  bool print_prelude = false;
  bool no_cache = false;                     // --no-cache
  std::optional<std::string> cache_dir;      // default: $UDF_CACHE_DIR, $XDG_CACHE_HOME/udf, ~/.cache/udf
  DepfileOptions depfile;                    // -MD -MF -MT -MP
  // Limits of the compile (udfc) or link (udf-link): udf/support/watchdog.h.
  std::optional<std::string> compile_timeout;       // --compile-timeout SECONDS; default $UDF_COMPILE_TIMEOUT or 300
  std::optional<std::string> compile_memory_limit;  // --compile-memory-limit MiB; default $UDF_COMPILE_MEMORY_LIMIT or 8192
  LimitHandler on_compile_limit;                    // ends the process when one is passed (the tool's); none: no limits
};

struct UdfcResult {
  std::string out;                    // what goes to standard output
  std::vector<Diagnostic> warnings;   // compiler warnings, printed as warnings
  std::string verbose_log;            // the compilers' raw logs and what was done, for -v
};

Expected<UdfcResult> run_udfc(const UdfcConfig& cfg);

/// The UDF's metadata from udfc's flags (--kind --elem --acc --order --coarse-metric
/// --coarse-weights --monotone -D --capture --arch --initial --symbol --finalize): every value checked,
/// every bad one reported (usage errors).  Reads no file.
Expected<UdfMetadata> udfc_metadata(const UdfcConfig& cfg);

/// The flags in the first line of a UDF source, a comment `// udfc: FLAGS`
/// (CUDA, MLIR) or `; udfc: FLAGS` (LLVM IR text), split with shell-like
/// quoting (`// udfc:` alone: none).  A text input whose first line is no
/// such comment is a usage error at FILE:1 showing the form; a binary one
/// (LTO-IR, bitcode), which cannot hold it, has none.  `--flags-from-first-line`.
Expected<std::vector<std::string>> udfc_first_line_flags(const std::string& path);

/// `udfc --version`: the tool's version and the CUDA libraries it uses.
std::string udfc_version_report();

}  // namespace udf
