// Modules: the manifest's checks, its metrics and filters, and the scan and
// merge kernels of its images.
#include "module/module.h"

#include <algorithm>
#include <cstring>
#include <regex>

#include "cuda/tensors.h"
#include "module/launch.h"
#include "module/sort_capacity.h"
#include "udf/kernels/ivf_flat_v1.h"
#include "udf/support/hash.h"

namespace udf::rt {
namespace {

udf_dtype capture_dtype(CaptureType t) {
  switch (t) {
    case CaptureType::F32: return UDF_DTYPE_F32;
    case CaptureType::F16: return UDF_DTYPE_F16;
    case CaptureType::I32: return UDF_DTYPE_I32;
    case CaptureType::U8: return UDF_DTYPE_U8;
  }
  return UDF_DTYPE_F32;
}

int k_max_of(const ModuleEntry& e) {
  if (e.launch.count("k_max")) return static_cast<int>(launch_value(e, "k_max"));
  std::smatch m;
  static const std::regex re("_k([0-9]+)$");
  if (std::regex_search(e.variant, m, re)) return std::stoi(m[1]);
  return 0;
}

std::string archs_of(const ModuleManifest& m) {
  std::string s;
  for (Arch a : m.archs) s += (s.empty() ? "" : ", ") + arch_name(a);
  return s;
}

// The module's checks before anything is loaded.
void check_manifest(const ModuleManifest& mf, const std::string& name) {
  if (mf.abi_id != "ivf_flat.metric.v1" || mf.abi_version != 1)
    fail(UDF_ERROR_MISMATCH, name + ": module ABI " + mf.abi_id + " version " + std::to_string(mf.abi_version) +
                                 " is not supported (this runtime runs ivf_flat.metric.v1 version 1)");
  if (mf.version_minor > kModuleManifestMinor)
    fail(UDF_ERROR_MISMATCH, name + ": module manifest version 1." + std::to_string(mf.version_minor) +
                                 " is newer than this runtime reads (1." + std::to_string(kModuleManifestMinor) +
                                 "): its kernels may take arguments this runtime does not pass; load it with a newer runtime");
  if (mf.kernel_pack_name != "ivf_flat_v1")
    fail(UDF_ERROR_MISMATCH, name + ": module was linked with kernel pack '" + mf.kernel_pack_name +
                                 "'; this runtime runs ivf_flat_v1");
  if (mf.artifacts.empty()) fail(UDF_ERROR_BAD_FORMAT, name + ": module has no metrics");
}

}  // namespace

udf_module* load_module(udf_runtime* rt, std::span<const std::uint8_t> bytes, const std::string& name) {
  require(rt != nullptr, "runtime is NULL");
  auto parsed = parse_module(bytes, name);
  if (!parsed) fail(UDF_ERROR_BAD_FORMAT, parsed.error().message());
  check_manifest(parsed->manifest, name);
  std::vector<ModuleEntry> entries = std::move(parsed->manifest.entries);
  parsed->manifest.entries.clear();
  auto m = new_module(rt, name, std::move(parsed->manifest), entries);
  load_images(m.get(), parsed->images, entries);
  ++rt->live_children;
  return m.release();
}

std::unique_ptr<udf_module> new_module(udf_runtime* rt, std::string name, ModuleManifest manifest,
                                       const std::vector<ModuleEntry>& available) {
  auto m = std::make_unique<udf_module>();
  m->rt = rt;
  m->name = std::move(name);
  m->manifest = std::move(manifest);
  const ModuleManifest& mf = m->manifest;
  // Each metric's largest k: its largest unfiltered scan with a merge of the same k_max.
  auto max_k_of = [&](std::size_t i, Order order) {
    int max_k = 0;
    for (const auto& s : available) {
      const int kmax = k_max_of(s);
      if (!s.artifact || *s.artifact != static_cast<int>(i) || s.filter) continue;
      const bool merge = std::any_of(available.begin(), available.end(), [&](const ModuleEntry& e) {
        return !e.artifact && e.variant.rfind("udf_ivf_merge_v1_", 0) == 0 && k_max_of(e) == kmax &&
               (e.variant.find("_max_") != std::string::npos) == (order == Order::Max);
      });
      if (merge) max_k = std::max(max_k, kmax);
    }
    return max_k;
  };
  for (size_t i = 0; i < mf.artifacts.size(); ++i) {
    const ModuleArtifact& a = mf.artifacts[i];
    udf_module::Metric mt;
    mt.finalize = a.finalize.value_or("");
    for (const Capture& c : a.captures)
      mt.captures.push_back(udf_capture_info{c.name.c_str(), capture_dtype(c.type), c.array ? 1 : 0});
    const int max_k = max_k_of(i, a.order);
    if (max_k == 0)
      fail(UDF_ERROR_BAD_FORMAT, m->name + ": metric " + a.symbol + " has no scan entry with a matching merge kernel");
    udf_metric_info& inf = mt.info;
    inf.symbol = a.symbol.c_str();
    inf.finalize = nullptr;
    inf.source_name = a.source_name.c_str();
    inf.cache_key = a.cache_key.c_str();
    inf.elem = to_dtype(a.elem);
    inf.acc = a.acc == AccType::F32 ? UDF_DTYPE_F32 : UDF_DTYPE_I32;
    inf.order = a.order == Order::Min ? UDF_ORDER_MIN : UDF_ORDER_MAX;
    inf.coarse_metric = a.coarse_metric == CoarseMetric::L2             ? UDF_COARSE_L2
                        : a.coarse_metric == CoarseMetric::InnerProduct ? UDF_COARSE_INNER_PRODUCT
                                                                        : UDF_COARSE_COSINE;
    inf.initial = a.shape ? 0.0 : a.initial.value;
    mt.abi = !a.shape ? UDF_METRIC_ABI_V1 : *a.shape == MetricShape::State ? UDF_METRIC_ABI_V2_STATE : UDF_METRIC_ABI_V2_VECTOR;
    inf.n_captures = static_cast<uint32_t>(a.captures.size());
    inf.max_k = static_cast<uint32_t>(max_k);
    m->metrics.push_back(std::move(mt));
  }
  for (auto& mt : m->metrics) mt.info.finalize = mt.finalize.empty() ? nullptr : mt.finalize.c_str();
  for (const ModuleFilter& f : mf.filters) {
    udf_module::Filter ft;
    for (const Capture& c : f.captures)
      ft.captures.push_back(udf_capture_info{c.name.c_str(), capture_dtype(c.type), c.array ? 1 : 0});
    ft.info.symbol = f.symbol.c_str();
    ft.info.source_name = f.source_name.c_str();
    ft.info.cache_key = f.cache_key.c_str();
    ft.info.n_captures = static_cast<uint32_t>(f.captures.size());
    m->filters.push_back(std::move(ft));
  }
  m->json = to_json(m->manifest);
  return m;
}

void load_images(udf_module* m, std::span<const Bytes> images, const std::vector<ModuleEntry>& entries) {
  CtxGuard g(m->rt->ctx);
  const int first = static_cast<int>(m->libs.size());
  const bool describe = m->manifest.images.size() == m->libs.size();  // linked here: no manifest entry yet
  for (const auto& image : images) {
    CUlibrary lib = nullptr;
    CU(cuLibraryLoadData, &lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    m->libs.emplace_back(lib);
    if (describe) m->manifest.images.push_back(ModuleImage{image.size(), sha256_hex(image)});
  }
  const ModuleManifest& mf = m->manifest;
  // Lazy loading: code for this GPU is looked up only here, so fetch every entry now.
  for (ModuleEntry e : entries) {
    e.image += first;
    CUkernel k = nullptr;
    CUresult r = cuda().cuLibraryGetKernel(&k, m->libs.at(e.image).get(), e.name.c_str());
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
      fail(UDF_ERROR_NO_BINARY_FOR_GPU, m->name + ": the module has no code for this GPU (" + m->rt->info.name + ", sm_" +
                                            std::to_string(m->rt->info.arch) + "); it was linked for " + archs_of(mf) +
                                            ": link it again with --arch sm_" + std::to_string(m->rt->info.arch));
    cu_check(r, "cuLibraryGetKernel", m->name + ": entry " + e.name);
    CUfunction f = nullptr;
    cu_check(cuda().cuKernelGetFunction(&f, k), "cuKernelGetFunction", m->name + ": entry " + e.name);
    const int kmax = k_max_of(e);
    if (e.artifact) {
      if (*e.artifact < 0 || static_cast<size_t>(*e.artifact) >= mf.artifacts.size() || kmax <= 0)
        fail(UDF_ERROR_BAD_FORMAT, m->name + ": entry " + e.name + " has a bad artifact index or k_max");
      if (e.filter && (*e.filter < 0 || static_cast<size_t>(*e.filter) >= mf.filters.size()))
        fail(UDF_ERROR_BAD_FORMAT, m->name + ": entry " + e.name + " has a bad filter index");
      m->scans.push_back(udf_module::Scan{*e.artifact, e.filter.value_or(-1), kmax, recommended_queries_per_item(e), e.name, f,
                                          launch_flag(e, "tail_merge"), launch_flag(e, "query_bound"), launch_flag(e, "prune"),
                                          scan_sort_capacity(e.launch, static_cast<uint32_t>(kmax)), launch_flag(e, "rows")});
      udf_module::Scan& scan = m->scans.back();
      scan.direct_only = launch_flag(e, "direct_only");
      scan.copied_stage = launch_value(e, "smem_copied_stage") == UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES;
      if (scan.copied_stage && launch_value(e, "tile_queries") == UDF_IVF_SCAN_ROWS_TILE_QUERIES)
        scan.tile_queries = UDF_IVF_SCAN_ROWS_TILE_QUERIES;
    } else if (e.variant.rfind("udf_ivf_merge_v1_", 0) == 0 && kmax > 0) {
      const bool is_max = e.variant.find("_max_") != std::string::npos;
      m->merges.push_back(udf_module::Merge{is_max ? Order::Max : Order::Min, kmax, e.name, f});
    }
    m->manifest.entries.push_back(std::move(e));
  }
  m->json = to_json(m->manifest);
}

size_t find_metric(const udf_module* m, const char* symbol) {
  std::string names;
  for (size_t i = 0; i < m->metrics.size(); ++i) {
    if (std::strcmp(m->metrics[i].info.symbol, symbol) == 0) return i;
    names += (names.empty() ? "" : ", ") + std::string(m->metrics[i].info.symbol);
  }
  fail(UDF_ERROR_INVALID_ARGUMENT, std::string("metric '") + symbol + "' is not in module " + m->name +
                                       " (it has: " + names + ")");
}

int32_t declared_coarse_weights(const udf_module* m, size_t metric) {
  const ModuleArtifact& a = m->manifest.artifacts[metric];
  if (!a.coarse_weights) return -1;
  for (size_t c = 0; c < a.captures.size(); ++c)
    if (a.captures[c].name == *a.coarse_weights) return static_cast<int32_t>(c);
  return -1;  // not reached: the manifest's reader checked the name
}

size_t find_filter(const udf_module* m, const char* symbol) {
  std::string names;
  for (size_t i = 0; i < m->filters.size(); ++i) {
    if (std::strcmp(m->filters[i].info.symbol, symbol) == 0) return i;
    names += (names.empty() ? "" : ", ") + std::string(m->filters[i].info.symbol);
  }
  fail(UDF_ERROR_INVALID_ARGUMENT, std::string("filter '") + symbol + "' is not in module " + m->name + " (it has " +
                                       (names.empty() ? std::string("no filters") : "filters: " + names) + ")");
}

}  // namespace udf::rt
