// udf_module_link / udf_module_link_ex: run-time linking of artifacts into a
// loaded module, for libraries that receive UDFs while running.  The same
// pipeline as udf-link (lib/link: plan_link / run_link, nvJitLink -lto,
// nvFatbin) and the same on-disk cache entries (each entry's cubin, and
// udf_module_link's whole module under link_cache_key), for the arch of the
// runtime's GPU.  On demand (udf_module_link_ex), a k bucket's entries are
// linked when a search first needs them (ensure_linked), the first bucket in
// the background from the start.  NVRTC and nvJitLink are loaded with dlopen
// by lib/link: no LLVM here.
#include "module/link_session.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "module/launch.h"
#include "udf/link/link.h"
#include "udf/support/cache.h"
#include "udf/support/hash.h"
#include "udf/support/install_layout.h"

namespace udf::rt {
namespace {

std::string one_line(const Error& e) {
  std::string s;
  for (const auto& d : e.diagnostics()) {
    if (!s.empty()) s += "; ";
    if (!d.file.empty()) s += d.file + (d.line ? ":" + std::to_string(d.line) : std::string()) + ": ";
    s += d.message;
    for (const auto& n : d.notes) s += " (" + n + ")";
  }
  return s;
}

}  // namespace

std::string runtime_kernel_pack_dir() {
  if (const char* e = std::getenv("UDF_KERNEL_PACK_DIR"); e && *e) return e;
  // Next to this library (a Python process finds <prefix>/share/udf/kernels
  // next to <prefix>/lib), else next to the executable.
  for (const auto& data : data_dirs_near_library(shared_object_dir(reinterpret_cast<const void*>(&runtime_kernel_pack_dir)))) {
    auto cand = std::filesystem::path(data) / "kernels";
    std::error_code ec;
    if (std::filesystem::is_directory(cand, ec)) return cand.string();
  }
  return default_kernel_pack_dir();
}

Expected<LinkSession> prepare_link(const std::vector<ArtifactInput>& inputs, Arch arch, const LinkModuleOptions& opt,
                                   LinkStage* stage) {
  LinkStage ignored;
  if (!stage) stage = &ignored;
  *stage = LinkStage::Args;
  if (inputs.empty()) return usage_error("no artifacts to link");
  LinkSession s;
  s.opt = opt;
  std::vector<Diagnostic> errs;
  for (const auto& in : inputs) {
    Bytes bytes = in.bytes;
    if (!in.path.empty()) {
      auto b = read_file(in.path, limits::kArtifact);
      if (!b) {
        *stage = LinkStage::Read;
        errs.insert(errs.end(), b.error().diagnostics().begin(), b.error().diagnostics().end());
        continue;
      }
      bytes = std::move(*b);
    }
    auto a = parse_artifact(bytes, in.name);
    if (!a) {
      if (*stage != LinkStage::Read) *stage = LinkStage::Parse;
      errs.insert(errs.end(), a.error().diagnostics().begin(), a.error().diagnostics().end());
      continue;
    }
    s.arts.push_back(LinkArtifact{in.name, std::move(*a), sha256_hex(bytes)});
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));

  *stage = LinkStage::KernelPack;
  UDF_TRY(pack, load_kernel_pack(opt.kernel_pack_dir.value_or(runtime_kernel_pack_dir()), false));
  s.pack = std::move(pack);
  *stage = LinkStage::Plan;
  UDF_TRY(plan, plan_link(s.arts, s.pack, {arch}, LinkSelection{{}, opt.max_k, opt.rows, opt.direct}));
  s.plan = std::move(plan);
  // Only the pack files this module's entries use (a small part of the pack).
  *stage = LinkStage::KernelPack;
  const std::vector<std::string> files = plan_pack_files(s.plan);
  UDF_TRY_VOID(read_kernel_pack_files(s.pack, &files));
  s.cache_key = link_cache_key(s.arts, s.pack, s.plan, EmitKind::Module);
  return s;
}

namespace {

Cache open_cache(const LinkModuleOptions& opt, std::vector<std::string>& warnings) {
  if (opt.no_cache) return Cache::disabled();
  auto opened = Cache::open(opt.cache_dir);
  if (opened) return std::move(*opened);
  warnings.push_back("cache disabled: " + opened.error().message());
  return Cache::disabled();
}

}  // namespace

Expected<LinkOutput> link_entries(const LinkSession& s, const std::vector<int>& entries, std::vector<std::string>& warnings) {
  Cache cache = open_cache(s.opt, warnings);
  LinkRunOptions run;
  run.threads = s.opt.threads;
  if (cache.enabled()) {
    run.lookup = [&](const std::string& k) -> std::optional<Bytes> {
      auto hit = cache.get(k);
      if (!hit) {
        warnings.push_back("cache read failed: " + hit.error().message());
        return std::nullopt;
      }
      return std::move(*hit);
    };
    run.store = [&](const std::string& k, const Bytes& cubin) {
      if (auto put = cache.put(k, cubin); !put) warnings.push_back("cache write failed: " + put.error().message());
    };
  }
  return run_link(s.arts, s.pack, s.plan, EmitKind::Module, run, entries);
}

Expected<LinkedModule> link_module_for_arch(const std::vector<ArtifactInput>& inputs, Arch arch,
                                            const LinkModuleOptions& opt, LinkStage* stage) {
  LinkStage ignored;
  if (!stage) stage = &ignored;
  UDF_TRY(s, prepare_link(inputs, arch, opt, stage));
  LinkedModule r;
  r.cache_key = s.cache_key;
  Cache cache = open_cache(opt, r.warnings);
  if (cache.enabled()) {
    auto hit = cache.get(r.cache_key);
    if (!hit) r.warnings.push_back("cache read failed: " + hit.error().message());
    else if (*hit && parse_module(**hit, "cache entry " + r.cache_key)) {
      r.bytes = std::move(**hit);
      r.cache_hit = true;
      return r;
    }
  }
  *stage = LinkStage::Link;
  UDF_TRY(out, link_entries(s, {}, r.warnings));
  r.bytes = serialize_module(std::move(out.module));
  if (cache.enabled())
    if (auto put = cache.put(r.cache_key, r.bytes); !put) r.warnings.push_back("cache write failed: " + put.error().message());
  return r;
}

std::vector<int> bucket_entries_for(const LinkSession& s, int metric, int filter, uint32_t k, bool rows) {
  const LinkPlan& plan = s.plan;
  // The module's metric i is the i-th metric input; filter j the j-th filter input.
  auto input_of = [&](UdfKind kind, int index) {
    int seen = 0;
    for (std::size_t i = 0; index >= 0 && i < s.arts.size(); ++i)
      if (s.arts[i].artifact.manifest.kind == kind && seen++ == index) return static_cast<int>(i);
    return -1;
  };
  const int input = input_of(UdfKind::Metric, metric), filter_input = input_of(UdfKind::Filter, filter);
  if (input < 0 || (filter >= 0 && filter_input < 0)) return {};
  const Order order = s.arts[input].artifact.manifest.order;
  auto k_max = [&](std::size_t e) { return static_cast<int>(launch_value(plan.entries[e], "k_max")); };
  auto merge_of = [&](int kmax) {
    for (std::size_t e = 0; e < plan.entries.size(); ++e) {
      const ModuleEntry& me = plan.entries[e];
      if (plan.planned[e].metric < 0 && me.variant.rfind("udf_ivf_merge_v1_", 0) == 0 && k_max(e) == kmax &&
          (me.variant.find("_max_") != std::string::npos) == (order == Order::Max))
        return static_cast<int>(e);
    }
    return -1;
  };
  auto mine = [&](std::size_t e) {
    return plan.planned[e].metric == input && plan.planned[e].filter == filter_input && launch_flag(plan.entries[e], "rows") == rows &&
           !plan.entries[e].launch.count("direct_only");
  };
  int bucket = 0;
  for (std::size_t e = 0; e < plan.entries.size(); ++e)
    if (mine(e) && k_max(e) >= static_cast<int>(k) && (bucket == 0 || k_max(e) < bucket) && merge_of(k_max(e)) >= 0)
      bucket = k_max(e);
  if (bucket == 0) return {};
  std::vector<int> out;
  for (std::size_t e = 0; e < plan.entries.size(); ++e)
    if (mine(e) && k_max(e) == bucket) out.push_back(static_cast<int>(e));
  out.push_back(merge_of(bucket));
  return out;
}

bool optional_entry(const LinkSession& s, int e) {
  const LinkPlan& plan = s.plan;
  auto launch = [&](std::size_t i, const char* key) { return launch_value(plan.entries[i], key); };
  if (e < 0 || static_cast<std::size_t>(e) >= plan.entries.size() || plan.planned[e].metric < 0 || launch(e, "prune") != 1)
    return false;
  for (std::size_t i = 0; i < plan.entries.size(); ++i)
    if (plan.planned[i].metric == plan.planned[e].metric && plan.planned[i].filter == plan.planned[e].filter &&
        launch(i, "k_max") == launch(e, "k_max") && launch(i, "rows") == launch(e, "rows") && launch(i, "prune") != 1)
      return true;
  return false;
}

int direct_twin(const LinkSession& s, int e) {
  const auto& entries = s.plan.entries;
  if (e < 0 || static_cast<std::size_t>(e) >= entries.size() || entries[e].launch.count("direct_only")) return -1;
  const std::string name = entries[e].name + kDirectEntrySuffix;
  for (std::size_t i = 0; i < entries.size(); ++i)  // (planned right after its scan)
    if (const std::size_t t = (e + 1 + i) % entries.size(); entries[t].name == name) return static_cast<int>(t);
  return -1;
}

std::vector<int> prefetch_order(const LinkSession& s, std::size_t n_metrics, std::size_t n_filters, uint32_t k) {
  if (k == 0) return {};
  std::set<int> entries;
  for (std::size_t mi = 0; mi < n_metrics; ++mi)
    for (int fi = -1; fi < static_cast<int>(n_filters); ++fi)
      for (int e : bucket_entries_for(s, static_cast<int>(mi), fi, k)) {
        entries.insert(e);
        if (const int t = direct_twin(s, e); t >= 0) entries.insert(t);
      }
  // 0 merges, 1 unfiltered direct twins, 2 filtered ones, 3 unfiltered
  // scans, 4 filtered scans, 5 optional scans; in plan order within each.
  std::vector<std::pair<int, int>> ranked;  // (rank, entry)
  for (int e : entries) {
    const PlannedEntry& pe = s.plan.planned[e];
    const int twin = s.plan.entries[e].launch.count("direct_only") ? 0 : 2;
    ranked.emplace_back(optional_entry(s, e) ? 5 : pe.metric < 0 ? 0 : (pe.filter < 0 ? 1 : 2) + twin, e);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int> out;
  for (const auto& [rank, e] : ranked) out.push_back(e);
  return out;
}

int link_wave(const LinkSession& s, int e) {
  if (optional_entry(s, e)) return 2;
  return direct_twin(s, e) >= 0 ? 1 : 0;
}

}  // namespace udf::rt

namespace udf::rt {

udf_status link_stage_status(LinkStage stage) {
  switch (stage) {
    case LinkStage::Read: return UDF_ERROR_IO;
    case LinkStage::Parse: return UDF_ERROR_BAD_FORMAT;
    case LinkStage::KernelPack: return UDF_ERROR_IO;
    case LinkStage::Plan: return UDF_ERROR_MISMATCH;
    case LinkStage::Link: return UDF_ERROR_MISMATCH;
    case LinkStage::Args: return UDF_ERROR_INVALID_ARGUMENT;
  }
  return UDF_ERROR_INTERNAL;
}

std::string link_error_text(const Error& e) { return one_line(e); }

}  // namespace udf::rt
