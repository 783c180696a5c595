// udf-link as a library call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udf/support/depfile.h"
#include "udf/support/error.h"
#include "udf/support/watchdog.h"

namespace udf {

struct UdfLinkConfig {
  std::vector<std::string> inputs;            // .udfa artifacts: metrics and filters
  std::vector<std::string> pairs;             // --pair METRIC:FILTER; none: every metric with every filter
  std::optional<int> max_k;                   // --max-k K: the k buckets for searches up to K; none: every bucket
  bool exact = false;                         // --exact: also the rows entries (exact search and refine)
  std::optional<int> jobs;                    // -j N: links at once; none: $UDF_LINK_JOBS or the CPUs
  std::optional<std::string> output;          // -o
  std::vector<std::string> archs;             // --arch, each may be a comma list
  std::string emit = "module";                // module | fatbin | cubin
  std::optional<std::string> kernel_pack_dir; // --kernel-pack
  bool dry_run = false;
  bool save_temps = false;
  bool no_cache = false;
  std::optional<std::string> cache_dir;
  DepfileOptions depfile;                     // -MD -MF -MT -MP
  // Limits of the compile (udfc) or link (udf-link): udf/support/watchdog.h.
  std::optional<std::string> compile_timeout;       // --compile-timeout SECONDS; default $UDF_COMPILE_TIMEOUT or 300
  std::optional<std::string> compile_memory_limit;  // --compile-memory-limit MiB; default $UDF_COMPILE_MEMORY_LIMIT or 8192
  LimitHandler on_compile_limit;                    // ends the process when one is passed (the tool's); none: no limits
};

struct UdfLinkResult {
  std::string out;                   // standard output (the plan, for --dry-run)
  std::vector<Diagnostic> warnings;
  std::string verbose_log;           // what was linked and where the time went, for -v
};

Expected<UdfLinkResult> run_udf_link(const UdfLinkConfig& cfg);

/// `udf-link --version`: the tool's version, the CUDA libraries it uses and
/// the kernel pack it would link with.
std::string udf_link_version_report(const std::optional<std::string>& kernel_pack_dir);

}  // namespace udf
