// udf-run as a library call: load a module, build or load an IVF-Flat index
// over a dataset file, search a query file, write neighbours and distances,
// and with `check` compare with an exhaustive search (every list probed).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf {

struct UdfRunConfig {
  std::string module;                    // .udfm
  std::optional<std::string> metric;     // symbol; default: the module's only metric
  std::optional<std::string> dataset;    // .fvecs .bvecs .npy (not needed with --load-index)
  std::string queries;                   // .fvecs .bvecs .npy
  std::optional<std::string> index;      // .udfi
  bool save_index = false;               // build, then write `index`
  bool load_index = false;               // read `index` instead of building
  std::uint32_t k = 10;
  std::uint32_t n_probes = 32;
  std::uint32_t n_lists = 1024;
  std::uint32_t kmeans_iters = 20;
  std::uint32_t kmeans_mesoclusters = 0;  // udf_index_params.kmeans_mesoclusters (0: the runtime's default)
  std::optional<std::string> coarse_weights;  // .npy of dim f32: udf_index_params.coarse_weights of a new index
  std::vector<std::string> captures;     // NAME=FILE.npy or NAME=VALUE (the metric's)
  std::optional<std::string> filter;     // a filter of the module (--filter)
  std::vector<std::string> filter_captures;  // the filter's, NAME=FILE.npy or NAME=VALUE
  std::optional<std::string> out;        // .npy (ids; distances beside it) or .json
  bool check = false;
  // --exact: every row of the dataset scored (udf_exact_search), no index;
  // --refine FILE: each query's candidates (an n_queries x m int64 .npy)
  // re-ranked (udf_refine).  The module needs its rows entries (udf-link --exact).
  bool exact = false;
  std::optional<std::string> refine;
  std::optional<std::int32_t> device;    // --device N (default 0)
  // --devices 0,1: the index sharded over these CUDA ordinals (repeats
  // allowed: 0,0 is two shards on device 0); excludes `device`.
  std::optional<std::string> devices;
  // --shard-layout lists|vectors: how the devices of --devices split the
  // vectors (udf_shard_layout; default vectors); needs `devices`.
  std::optional<std::string> shard_layout;
  bool progress = true;
};

struct UdfRunResult {
  std::string out;                 // standard output: recall@k, when checked
  std::vector<Diagnostic> warnings;
  std::string verbose_log;         // timings
  std::string summary;             // one line for standard error
  double recall = -1;              // < 0: not checked
};

/// Progress of the index build: fraction in [0, 1] and stage name.
using UdfRunProgress = std::function<void(double fraction, const char* stage)>;

/// Parses `NAME=VALUE` capture specs and reads their files (no GPU needed).
struct CaptureSpec {
  std::string name;
  std::optional<std::string> file;  // NAME=FILE.npy
  double value = 0;                 // NAME=VALUE
};
Expected<CaptureSpec> parse_capture_spec(const std::string& spec);

/// Parses `--devices` (comma-separated CUDA ordinals, each a whole number
/// >= 0; repeats allowed) into the ordinals in order; a usage error naming
/// the first bad item otherwise.
Expected<std::vector<std::int32_t>> parse_device_list(const std::string& list);

/// Parses `--shard-layout`: "lists" (UDF_SHARD_BY_LISTS) or "vectors"
/// (UDF_SHARD_BY_VECTORS); a usage error naming the value otherwise.
Expected<std::uint32_t> parse_shard_layout(const std::string& name);

Expected<UdfRunResult> run_udf_run(const UdfRunConfig& cfg, const UdfRunProgress& progress = {});

/// `udf-run --version`: the tool, the runtime library and CUDA driver it
/// uses, and the CUDA libraries udf_module_link would load.
std::string udf_run_version_report();

}  // namespace udf
