#include "udf/driver/udf_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/artifact/module.h"
#include "udf/data/vector_files.h"
#include "udf/runtime.h"
#include "udf/compile/cuda.h"
#include "udf/compile/ir.h"
#include "udf/link/fatbin.h"
#include "udf/link/jitlink.h"
#include "udf/support/install_layout.h"
#include "udf/support/version.h"
#include "outputs.h"

namespace udf {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A failed runtime call as an Error: exit 3 for internal errors, else 1.
Error runtime_error(udf_status s, const std::string& what) {
  std::string m = what + ": " + udf_last_error();
  return Error(s == UDF_ERROR_INTERNAL ? ErrorKind::Internal : ErrorKind::Diagnosed, DiagCode::Runtime, m);
}

#define UDF_RT(call, what)                                              \
  do {                                                                  \
    udf_status s_ = (call);                                             \
    if (s_ != UDF_OK) return runtime_error(s_, what);                   \
  } while (0)

template <class T, void (*D)(T*)>
struct Owned {
  T* p = nullptr;
  ~Owned() { if (p) D(p); }
};

DType to_dtype(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: return DType::F32;
    case UDF_DTYPE_F16: return DType::F16;
    case UDF_DTYPE_I8: return DType::I8;
    case UDF_DTYPE_U8: return DType::U8;
    case UDF_DTYPE_I32: return DType::I32;
    case UDF_DTYPE_I64: return DType::I64;
  }
  return DType::F32;
}

udf_dtype to_udf(DType t) {
  switch (t) {
    case DType::F32: return UDF_DTYPE_F32;
    case DType::F16: return UDF_DTYPE_F16;
    case DType::I8: return UDF_DTYPE_I8;
    case DType::U8: return UDF_DTYPE_U8;
    case DType::I32: return UDF_DTYPE_I32;
    case DType::I64: return UDF_DTYPE_I64;
    case DType::F64: break;
  }
  return UDF_DTYPE_F32;
}

udf_tensor view(HostMatrix& m) {
  return udf_tensor{m.data.data(), UDF_HOST_DEVICE, to_udf(m.dtype), static_cast<int64_t>(m.rows),
                    static_cast<int64_t>(m.cols), 0};
}

struct BoundCapture {
  std::string name;
  HostMatrix array;
  bool is_array = false;
  udf_tensor tensor{};
  udf_capture_binding binding{};
};

std::string json_number(float v) {
  if (std::isnan(v)) return "null";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{}", v);
}

std::string render_json(const std::string& metric, std::uint32_t k, std::uint64_t n, const std::vector<std::int64_t>& ids,
                        const std::vector<float>& dist) {
  std::string s = fmt::format("{{\n  \"metric\": {},\n  \"k\": {},\n  \"queries\": {},\n  \"ids\": [",
                              nlohmann::json(metric).dump(), k, n);
  for (std::uint64_t q = 0; q < n; ++q) {
    s += q ? ",\n    [" : "\n    [";
    for (std::uint32_t j = 0; j < k; ++j) s += fmt::format("{}{}", j ? ", " : "", ids[q * k + j]);
    s += "]";
  }
  s += n ? "\n  ],\n  \"distances\": [" : "],\n  \"distances\": [";
  for (std::uint64_t q = 0; q < n; ++q) {
    s += q ? ",\n    [" : "\n    [";
    for (std::uint32_t j = 0; j < k; ++j) s += (j ? ", " : "") + json_number(dist[q * k + j]);
    s += "]";
  }
  s += n ? "\n  ]\n}\n" : "]\n}\n";
  return s;
}

struct Progress {
  const UdfRunProgress* fn;
  static void call(void* user, double f, const char* stage) {
    auto* p = static_cast<Progress*>(user);
    if (p->fn && *p->fn) (*p->fn)(f, stage);
  }
};


// A declared capture of the metric or the filter.
struct CaptureDecl {
  std::string name;
  udf_dtype type;
  bool is_array;
};

// Binds every declared capture from the --capture (or --filter-capture)
// values: all bound, none unknown, arrays converted to the declared type.
// Problems go to `errs`.  `flag` names the option in messages.
void bind_captures(const std::string& owner, const std::vector<CaptureDecl>& declared, std::vector<BoundCapture>& caps,
                   const std::vector<CaptureSpec>& specs, const std::string& flag, std::vector<Diagnostic>& errs) {
  std::vector<std::string> names;
  for (const auto& ci : declared) {
    names.push_back(ci.name);
    auto it = std::find_if(caps.begin(), caps.end(), [&](const BoundCapture& b) { return b.name == ci.name; });
    if (it == caps.end()) {
      errs.push_back(Diagnostic(DiagCode::InputMismatch,
                                fmt::format("{} needs capture '{}' ({}{}): pass {} {}={}", owner, ci.name,
                                            to_string(to_dtype(ci.type)), ci.is_array ? "[]" : "", flag, ci.name,
                                            ci.is_array ? "FILE.npy" : "VALUE")));
      continue;
    }
    BoundCapture& b = *it;
    b.binding.name = b.name.c_str();  // lives as long as caps
    if (ci.is_array) {
      if (!b.is_array) {
        errs.push_back(Diagnostic(DiagCode::InputMismatch, fmt::format("{}: capture '{}' is an array: pass {} {}=FILE.npy", owner,
                                                                       ci.name, flag, ci.name)));
        continue;
      }
      auto c = convert(b.array, to_dtype(ci.type), flag + " " + b.name);
      if (!c) {
        errs.insert(errs.end(), c.error().diagnostics().begin(), c.error().diagnostics().end());
        continue;
      }
      b.array = c.take();
      b.tensor = udf_tensor{b.array.data.data(), UDF_HOST_DEVICE, ci.type, 1, static_cast<int64_t>(b.array.rows * b.array.cols), 0};
      b.binding.tensor = &b.tensor;
    } else {
      if (b.is_array) {
        errs.push_back(Diagnostic(DiagCode::InputMismatch, fmt::format("{}: capture '{}' is a scalar: pass {} {}=VALUE", owner,
                                                                       ci.name, flag, ci.name)));
        continue;
      }
      auto spec = std::find_if(specs.begin(), specs.end(), [&](const CaptureSpec& sp) { return sp.name == ci.name; });
      b.binding.tensor = nullptr;
      b.binding.f32 = static_cast<float>(spec->value);
      b.binding.i32 = static_cast<int32_t>(spec->value);
      if (ci.type == UDF_DTYPE_I32 && (spec->value != std::floor(spec->value) || std::fabs(spec->value) > 2147483647.0))
        errs.push_back(Diagnostic(DiagCode::InputMismatch, fmt::format("{}: capture '{}' is i32: {} is not a 32-bit integer",
                                                                       owner, ci.name, spec->value)));
    }
  }
  for (const auto& b : caps)
    if (std::find(names.begin(), names.end(), b.name) == names.end())
      errs.push_back(Diagnostic(DiagCode::InputMismatch,
                                fmt::format("{} has no capture '{}' (it declares: {})", owner, b.name,
                                            names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")))));
}

// Reads the files of NAME=FILE specs into `caps` (one per spec).
void read_capture_files(const std::vector<CaptureSpec>& specs, std::vector<BoundCapture>& caps, std::vector<Diagnostic>& errs) {
  caps.resize(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    caps[i].name = specs[i].name;
    if (specs[i].file) {
      auto m = read_vector_file(*specs[i].file);
      if (m) {
        caps[i].array = m.take();
        caps[i].is_array = true;
      } else {
        errs.insert(errs.end(), m.error().diagnostics().begin(), m.error().diagnostics().end());
      }
    }
  }
}
}  // namespace

Expected<CaptureSpec> parse_capture_spec(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("--capture '{}': expected NAME=FILE.npy or NAME=VALUE", spec));
  CaptureSpec c;
  c.name = spec.substr(0, eq);
  std::string v = spec.substr(eq + 1);
  if (ends_with(v, ".npy") || ends_with(v, ".fvecs") || ends_with(v, ".bvecs") || ends_with(v, ".ivecs")) {
    c.file = v;
    return c;
  }
  char* end = nullptr;
  c.value = std::strtod(v.c_str(), &end);
  if (!end || *end)
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("--capture '{}': '{}' is neither a number nor a .npy file", spec, v));
  return c;
}

Expected<UdfRunResult> run_udf_run(const UdfRunConfig& cfg, const UdfRunProgress& progress_fn) {
  auto t0 = Clock::now();
  UdfRunResult r;

  // 1. The command line.
  std::vector<Diagnostic> usage;
  auto use = [&](std::string m) { usage.push_back(Diagnostic(DiagCode::Usage, std::move(m))); };
  if (cfg.module.empty()) use("no module: pass MODULE.udfm");
  if (cfg.queries.empty()) use("no queries: pass --queries FILE");
  if (cfg.save_index && cfg.load_index) use("--save-index and --load-index exclude each other");
  if ((cfg.save_index || cfg.load_index) && !cfg.index) use("--save-index and --load-index need --index FILE");
  if (cfg.index && !cfg.save_index && !cfg.load_index) use("--index FILE needs --save-index or --load-index");
  if (!cfg.load_index && !cfg.dataset) use("no dataset: pass --dataset FILE (or --index FILE --load-index)");
  if (cfg.k == 0) use("--k must be at least 1");
  if (cfg.n_probes == 0) use("--n-probes must be at least 1");
  if (cfg.n_lists == 0) use("--n-lists must be at least 1");
  if (!cfg.out && !cfg.check) use("nothing to do: pass --out FILE (.npy or .json) and/or --check");
  if (cfg.out && !ends_with(*cfg.out, ".npy") && !ends_with(*cfg.out, ".json"))
    use(fmt::format("--out '{}': the output must be a .npy or .json file", *cfg.out));
  std::vector<CaptureSpec> specs, fspecs;
  for (const auto& [list, out, flag] : {std::tuple{&cfg.captures, &specs, "--capture"},
                                        std::tuple{&cfg.filter_captures, &fspecs, "--filter-capture"}}) {
    for (const auto& c : *list) {
      auto sp = parse_capture_spec(c);
      if (!sp) {
        for (auto d : sp.error().diagnostics()) {
          if (std::string(flag) != "--capture") d.message.replace(0, std::string("--capture").size(), flag);
          usage.push_back(std::move(d));
        }
      } else {
        out->push_back(*sp);
      }
    }
  }
  if (!cfg.filter && !cfg.filter_captures.empty()) use("--filter-capture needs --filter NAME");
  if (!usage.empty()) return Error(ErrorKind::Usage, std::move(usage));

  // 2. Every input file, before the GPU: bad files fail the same with or without one.
  std::vector<Diagnostic> errs;
  auto collect = [&](const Error& e) { errs.insert(errs.end(), e.diagnostics().begin(), e.diagnostics().end()); };
  HostMatrix data, queries;
  Bytes module_bytes;
  {
    auto b = read_file(cfg.module, limits::kModule);
    if (!b) collect(b.error());
    else if (auto m = parse_module(*b, cfg.module); !m) collect(m.error());
    else module_bytes = b.take();
  }
  if (cfg.dataset && !cfg.load_index) {
    auto d = read_vector_file(*cfg.dataset);
    if (d) data = d.take(); else collect(d.error());
  }
  auto q = read_vector_file(cfg.queries);
  if (q) queries = q.take(); else collect(q.error());
  std::vector<BoundCapture> caps, fcaps;
  read_capture_files(specs, caps, errs);
  read_capture_files(fspecs, fcaps, errs);
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  if (!cfg.load_index && queries.cols != data.cols)
    return diagnosed(DiagCode::InputMismatch, fmt::format("{}: queries have dimension {}, the dataset {} has {}", cfg.queries, queries.cols,
                                 *cfg.dataset, data.cols));
  for (const auto& [list, flag] : {std::pair{&caps, "--capture"}, std::pair{&fcaps, "--filter-capture"}})
    for (auto& c : *list)
      if (c.is_array && !c.array.one_d && c.array.rows != 1 && c.array.cols != 1)
        return diagnosed(DiagCode::InputMismatch,
                         fmt::format("{} {}: expected a 1-D array, found {} x {}", flag, c.name, c.array.rows, c.array.cols));
  auto read_ms = ms_since(t0);

  // 3. The GPU.
  auto t1 = Clock::now();
  Owned<udf_runtime, udf_runtime_destroy> rt;
  UDF_RT(udf_runtime_create(cfg.device, &rt.p), "cannot start the runtime");
  udf_device_info dev{};
  UDF_RT(udf_runtime_device_info(rt.p, &dev), "udf_runtime_device_info");
  Owned<udf_module, udf_module_destroy> mod;
  UDF_RT(udf_module_load_memory(rt.p, module_bytes.data(), module_bytes.size(), cfg.module.c_str(), &mod.p),
         "cannot load module " + cfg.module);
  size_t n_metrics = 0;
  UDF_RT(udf_module_metric_count(mod.p, &n_metrics), "udf_module_metric_count");
  size_t mi = 0;
  if (cfg.metric) {
    UDF_RT(udf_module_find_metric(mod.p, cfg.metric->c_str(), &mi), cfg.module);
  } else if (n_metrics != 1) {
    std::string names;
    for (size_t i = 0; i < n_metrics; ++i) {
      udf_metric_info info{};
      if (udf_module_metric_info(mod.p, i, &info) == UDF_OK) names += std::string(names.empty() ? "" : ", ") + info.symbol;
    }
    return usage_error(DiagCode::Usage, fmt::format("{} holds {} metrics ({}): choose one with --metric", cfg.module, n_metrics, names));
  }
  udf_metric_info metric{};
  UDF_RT(udf_module_metric_info(mod.p, mi, &metric), "udf_module_metric_info");
  std::string metric_name = metric.symbol;
  DType elem = to_dtype(metric.elem);
  auto load_ms = ms_since(t1);

  // Element types: files hold f32 / u8 / ...; the metric says what the index stores.
  if (!cfg.load_index) {
    auto c = convert(data, elem, *cfg.dataset);
    if (!c) return std::move(c.error()).note(fmt::format("metric {} stores {} elements", metric_name, to_string(elem)));
    data = c.take();
  }
  {
    auto c = convert(queries, elem, cfg.queries);
    if (!c) return std::move(c.error()).note(fmt::format("metric {} stores {} elements", metric_name, to_string(elem)));
    queries = c.take();
  }

  // Captures: every declared one bound, no unknown ones, types converted.
  std::vector<udf_capture_binding> bindings, fbindings;
  std::optional<size_t> fi;
  {
    std::vector<CaptureDecl> declared;
    for (uint32_t i = 0; i < metric.n_captures; ++i) {
      udf_capture_info ci{};
      UDF_RT(udf_module_capture_info(mod.p, mi, i, &ci), "udf_module_capture_info");
      declared.push_back(CaptureDecl{ci.name, ci.type, ci.is_array != 0});
    }
    bind_captures("metric " + metric_name, declared, caps, specs, "--capture", errs);
    if (cfg.filter) {
      size_t f = 0;
      UDF_RT(udf_module_find_filter(mod.p, cfg.filter->c_str(), &f), cfg.module);
      fi = f;
      udf_filter_info finfo{};
      UDF_RT(udf_module_filter_info(mod.p, f, &finfo), "udf_module_filter_info");
      std::vector<CaptureDecl> fdecl;
      for (uint32_t i = 0; i < finfo.n_captures; ++i) {
        udf_capture_info ci{};
        UDF_RT(udf_module_filter_capture_info(mod.p, f, i, &ci), "udf_module_filter_capture_info");
        fdecl.push_back(CaptureDecl{ci.name, ci.type, ci.is_array != 0});
      }
      bind_captures("filter " + *cfg.filter, fdecl, fcaps, fspecs, "--filter-capture", errs);
    }
    if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
    for (const auto& b : caps) bindings.push_back(b.binding);
    for (const auto& b : fcaps) fbindings.push_back(b.binding);
  }

  // 4. The index.
  auto t2 = Clock::now();
  Owned<udf_index, udf_index_destroy> ix;
  Progress prog{&progress_fn};
  if (cfg.load_index) {
    UDF_RT(udf_index_load(mod.p, cfg.index->c_str(), &ix.p), "cannot load index " + *cfg.index);
  } else {
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = cfg.n_lists;
    p.kmeans_iters = cfg.kmeans_iters;
    if (cfg.progress && progress_fn) {
      p.progress = &Progress::call;
      p.progress_user = &prog;
    }
    udf_tensor dv = view(data);
    UDF_RT(udf_index_build(mod.p, metric_name.c_str(), &dv, nullptr, &p, &ix.p), "cannot build the index");
  }
  auto index_ms = ms_since(t2);
  udf_index_info info{};
  UDF_RT(udf_index_info_get(ix.p, &info), "udf_index_info_get");
  if (cfg.load_index && info.dim != queries.cols)
    return diagnosed(DiagCode::InputMismatch, fmt::format("{}: queries have dimension {}, the index {} has {}", cfg.queries, queries.cols, *cfg.index, info.dim));
  if (cfg.save_index) UDF_RT(udf_index_save(ix.p, cfg.index->c_str()), "cannot save the index");

  // 5. Search.
  std::uint64_t n = queries.rows;
  std::uint32_t k = cfg.k;
  std::vector<float> dist(n * k);
  std::vector<std::int64_t> ids(n * k);
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.k = k;
  sp.n_probes = std::min(cfg.n_probes, info.n_lists);
  sp.captures = bindings.data();
  sp.n_captures = bindings.size();
  if (cfg.filter) {
    sp.filter = cfg.filter->c_str();
    sp.filter_captures = fbindings.data();
    sp.n_filter_captures = fbindings.size();
  }
  udf_tensor qv = view(queries);
  udf_tensor dt{dist.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, static_cast<int64_t>(n), k, 0};
  udf_tensor it{ids.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, static_cast<int64_t>(n), k, 0};
  auto t3 = Clock::now();
  UDF_RT(udf_index_search(ix.p, &qv, &sp, &dt, &it), "search failed");
  auto search_ms = ms_since(t3);
  if (cfg.n_probes > info.n_lists)
    r.warnings.push_back(Diagnostic(DiagCode::SearchAdjusted, fmt::format("--n-probes {} > n_lists {}: probing all lists", cfg.n_probes, info.n_lists)));

  // 6. Outputs.
  if (cfg.out) {
    if (ends_with(*cfg.out, ".json")) {
      UDF_TRY_VOID(write_file_atomic(*cfg.out, render_json(metric_name, k, n, ids, dist)));
    } else {
      HostMatrix im{DType::I64, n, k, false, {}};
      im.data.resize(ids.size() * 8);
      std::memcpy(im.data.data(), ids.data(), im.data.size());
      HostMatrix dm{DType::F32, n, k, false, {}};
      dm.data.resize(dist.size() * 4);
      std::memcpy(dm.data.data(), dist.data(), dm.data.size());
      std::string dpath = cfg.out->substr(0, cfg.out->size() - 4) + ".distances.npy";
      UDF_TRY_VOID(write_npy(*cfg.out, im));
      UDF_TRY_VOID(write_npy(dpath, dm));
    }
  }

  // 7. --check: the same UDF with every list probed is an exact search under
  // the same metric; recall@k = shared ids / reference ids.
  if (cfg.check) {
    std::vector<float> rdist(n * k);
    std::vector<std::int64_t> rids(n * k);
    udf_tensor rdt{rdist.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, static_cast<int64_t>(n), k, 0};
    udf_tensor rit{rids.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, static_cast<int64_t>(n), k, 0};
    udf_search_params ep = sp;
    ep.n_probes = info.n_lists;
    auto t4 = Clock::now();
    UDF_RT(udf_index_search(ix.p, &qv, &ep, &rdt, &rit), "exhaustive reference search failed");
    auto ref_ms = ms_since(t4);
    std::uint64_t hits = 0, total = 0;
    for (std::uint64_t qi = 0; qi < n; ++qi) {
      std::unordered_set<std::int64_t> ref;
      for (std::uint32_t j = 0; j < k; ++j)
        if (rids[qi * k + j] >= 0) ref.insert(rids[qi * k + j]);
      total += ref.size();
      for (std::uint32_t j = 0; j < k; ++j) hits += ids[qi * k + j] >= 0 && ref.count(ids[qi * k + j]);
    }
    r.recall = total ? static_cast<double>(hits) / static_cast<double>(total) : 1.0;
    r.out += fmt::format("recall@{}: {:.3f}\n", k, r.recall);
    r.verbose_log += fmt::format("udf-run: reference: exhaustive search (n_probes = n_lists = {}) in {:.1f} ms\n",
                                 info.n_lists, ref_ms);
  }

  r.summary = fmt::format("udf-run: {}{} on {} (sm_{}): index {} x {} {} in {} lists {} in {:.1f} ms; {} queries, k {}, "
                          "n_probes {} in {:.2f} ms ({:.0f} QPS)\n",
                          metric_name, cfg.filter ? " where " + *cfg.filter : std::string(), dev.name, dev.arch, info.size, info.dim, to_string(elem), info.n_lists,
                          cfg.load_index ? "loaded" : "built", index_ms, n, k, sp.n_probes, search_ms,
                          search_ms > 0 ? static_cast<double>(n) / (search_ms / 1e3) : 0.0);
  r.verbose_log = fmt::format("udf-run: read inputs in {:.1f} ms; runtime + module in {:.1f} ms\n", read_ms, load_ms) +
                  r.verbose_log;
  return r;
}

std::string udf_run_version_report() {
  std::vector<LibraryStatus> libs;
  libs.push_back(LibraryStatus{"udf runtime", true, shared_object_path(reinterpret_cast<const void*>(&udf_runtime_api_version)),
                               fmt::format("API {}", udf_runtime_api_version()), {}, {}});
  int32_t driver = 0;
  if (udf_driver_version(&driver) == UDF_OK)
    libs.push_back(LibraryStatus{"CUDA driver", true, "libcuda.so.1", fmt::format("{}.{}", driver / 1000, driver % 1000 / 10), {}, {}});
  else
    libs.push_back(LibraryStatus{"CUDA driver", false, {}, {}, udf_last_error(), {}});
  libs.push_back(nvrtc_library_status());
  libs.push_back(nvjitlink_library_status());
  libs.push_back(nvfatbin_library_status());
  libs.push_back(nvvm_library_status());
  return fmt::format("udf-run {}\n", kUdfVersion) + detail::library_report(libs);
}

}  // namespace udf
