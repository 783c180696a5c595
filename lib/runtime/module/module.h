// A loaded module behind udf_module*: its metrics and filters, and the scan
// and merge kernels loaded from its images (all at load, or bucket by bucket
// when a search first needs them: on_demand).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/runtime.h"
#include "module/link_session.h"
#include "udf/artifact/module.h"
#include "udf/runtime.h"

struct udf_module {
  struct Scan {
    int artifact = 0;
    int filter = -1;  // index into filters; -1: unfiltered
    int k_max = 0;
    int recommended_qpi = 1;
    std::string name;
    CUfunction fn = nullptr;
    bool tail_merge = false;   // merges each query's rows itself, with no merge kernel (ivf_flat_v1.h)
    bool query_bound = false;  // skips candidates its query's finished rows beat (args.query_bound, ivf_flat_v1.h)
    bool prune = false;        // a monotone metric's scan that drops vectors past the query's bound (ivf_flat_v1.h)
    uint32_t sort_capacity = 0;  // launch.sort_capacity: the sort capacity its shared memory is sized with
    bool rows = false;           // a rows scan: exact search and refine (ivf_flat_v1.h, ROWS LAYOUT)
    bool copied_stage = false;   // a rows scan that takes the copied row stage (launch.smem_copied_stage, pack 1.12)
    uint32_t tile_queries = 0;   // with the copied stage, it folds unfiltered items of this many queries as a tile
                                 // (launch.tile_queries, pack 1.14); 0: none
    bool direct_only = false;    // a direct twin: direct schedules only (launch.direct_only; ivf_flat_v1.h, DIRECT TWIN)
  };
  struct Merge {
    udf::Order order = udf::Order::Min;
    int k_max = 0;
    std::string name;
    CUfunction fn = nullptr;
  };
  struct Metric {
    udf_metric_abi abi = UDF_METRIC_ABI_V1;
    std::string finalize;
    std::vector<udf_capture_info> captures;
    udf_metric_info info{};
  };
  struct Filter {
    std::vector<udf_capture_info> captures;
    udf_filter_info info{};
  };
  udf_runtime* rt = nullptr;
  std::string name;
  udf::ModuleManifest manifest;
  std::string json;
  std::vector<udf::rt::Library> libs;  // one per image of the module (manifest.images)
  // Deques: an on-demand link appends while a search's pointers into them live.
  std::deque<Scan> scans;
  std::deque<Merge> merges;
  std::vector<Metric> metrics;
  std::vector<Filter> filters;
  int live_indexes = 0;
  bool released = false;  // udf_module_destroy was called while indexes lived: freed with the last one
  // udf_module_link_ex's on-demand modules: entries linked when a search first needs them.
  std::unique_ptr<udf::rt::OnDemandLink> on_demand;
  // Per metric, the rows index its exact searches and refines reuse (its
  // search scratch; index/rows_search.cpp); destroyed before the code above.
  std::vector<std::shared_ptr<udf_index>> rows_indexes;
};

namespace udf::rt {

/// Parses and checks a serialized module and loads its images (counted in rt).
udf_module* load_module(udf_runtime* rt, std::span<const std::uint8_t> bytes, const std::string& name);
/// A module of `manifest` without code: its metrics (each one's largest k
/// from the entries in `available`, those it has or can link) and filters.
/// The manifest's entries are those loaded (load_images adds them).
std::unique_ptr<udf_module> new_module(udf_runtime* rt, std::string name, ModuleManifest manifest,
                                       const std::vector<ModuleEntry>& available);
/// Loads fatbins and registers `entries` (their image indices count from the
/// first of `images`) as scans and merges; adds them to the manifest.
void load_images(udf_module* m, std::span<const Bytes> images, const std::vector<ModuleEntry>& entries);
/// The index of metric `symbol` in m; UDF_ERROR_INVALID_ARGUMENT naming the
/// module's metrics when it has none of that name.
size_t find_metric(const udf_module* m, const char* symbol);
/// The same for filter `symbol`.
size_t find_filter(const udf_module* m, const char* symbol);
/// The index of the capture metric `metric` names as its coarse weights
/// (ModuleArtifact::coarse_weights), or -1 when it names none.
int32_t declared_coarse_weights(const udf_module* m, size_t metric);
/// Whether a search takes a direct schedule with a scan of this
/// recommended_qpi and k_max (search_request.cpp).
using DirectFor = std::function<bool(int recommended_qpi, int k_max)>;
/// On-demand modules: links (unless done) and loads the entries a search of
/// metric `metric` (with filter `filter`, -1: none) for `k` needs (the rows
/// scans when `rows`: exact search and refine); nothing for other modules.
/// Where `direct` says the search takes a direct schedule, it needs a plain
/// scan's direct twin (link_session.h, direct_twin) in place of the scan
/// unless that is loaded.  module/on_demand.cpp.
void ensure_linked(udf_module* m, int metric, int filter, uint32_t k, bool rows = false, const DirectFor& direct = {});
/// A module of `session` whose entries are linked when searches need them
/// (prefetch_k's bucket started in the background now).  module/on_demand.cpp.
std::unique_ptr<udf_module> new_on_demand_module(udf_runtime* rt, LinkSession session, const std::string& name,
                                                 uint32_t prefetch_k);

}  // namespace udf::rt
