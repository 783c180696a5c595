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
#include "udf/compile/cuda.h"
#include "udf/compile/ir.h"
#include "udf/cudalibs/nvfatbin.h"
#include "udf/cudalibs/nvjitlink.h"
#include "udf/data/vector_files.h"
#include "udf/runtime.h"
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

Expected<std::vector<std::int32_t>> parse_device_list(const std::string& list) {
  auto bad = [&](const std::string& why) {
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("--devices '{}': {}", list, why));
  };
  if (list.empty()) return bad("no device: expected CUDA ordinals separated by commas, e.g. 0,1");
  std::vector<std::int32_t> out;
  for (std::size_t at = 0, item = 1;; ++item) {
    const std::size_t comma = list.find(',', at);
    const std::string v = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (v.empty()) return bad(fmt::format("device {} is empty: expected CUDA ordinals separated by commas, e.g. 0,1", item));
    const bool digits = std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || v.size() > 9) return bad(fmt::format("'{}' is not a CUDA device ordinal (a whole number >= 0)", v));
    out.push_back(static_cast<std::int32_t>(std::stol(v)));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

// The names of the C++ wrapper's shard_layout_from_name / shard_layout_name
// (include/udf/runtime.hpp) and of Python's shard_layout=.
static const char* shard_layout_name(std::uint32_t layout) {
  return layout == UDF_SHARD_BY_LISTS ? "lists" : layout == UDF_SHARD_BY_VECTORS ? "vectors" : nullptr;
}

Expected<std::uint32_t> parse_shard_layout(const std::string& name) {
  if (name == "lists") return std::uint32_t(UDF_SHARD_BY_LISTS);
  if (name == "vectors") return std::uint32_t(UDF_SHARD_BY_VECTORS);
  return usage_error(DiagCode::InvalidOptionValue,
                     fmt::format("--shard-layout '{}': expected lists (each device keeps a contiguous range of whole "
                                 "lists) or vectors (each device keeps an equal part of every list)",
                                 name));
}

namespace {

// One loaded runtime and module per distinct device.
struct OnDevice {
  std::int32_t ordinal = 0;
  udf_device_info info{};
  Owned<udf_runtime, udf_runtime_destroy> rt;
  Owned<udf_module, udf_module_destroy> mod;  // destroyed before rt
};

// What one run carries from stage to stage.  Members are destroyed in
// reverse order: the index before the modules and runtimes it uses.
struct Run {
  explicit Run(const UdfRunConfig& c, const UdfRunProgress& p) : cfg(c), prog{&p} {}
  const UdfRunConfig& cfg;
  Progress prog;
  Clock::time_point t0 = Clock::now();
  // The command line.
  std::vector<CaptureSpec> specs, fspecs;
  std::vector<std::int32_t> devices;  // empty: one GPU, --device
  std::uint32_t shard_layout = UDF_SHARD_DEFAULT;  // by vectors
  // The inputs.
  HostMatrix data, queries, candidates, coarse_weights;
  Bytes module_bytes;
  std::vector<BoundCapture> caps, fcaps;
  // The GPUs and the metric.
  bool sharded = false;
  std::vector<std::unique_ptr<OnDevice>> gpus;  // in the order first listed
  std::vector<udf_module*> shard_modules;
  udf_module* home = nullptr;  // the first (home) device's module
  size_t mi = 0;
  udf_metric_info metric{};
  std::string metric_name;
  DType elem = DType::F32;
  std::vector<udf_capture_binding> bindings, fbindings;
  // The index and the search.
  Owned<udf_index, udf_index_destroy> ix;
  udf_index_info info{};
  std::string plan;
  std::uint64_t n = 0;
  std::uint32_t k = 0;
  std::vector<float> dist;
  std::vector<std::int64_t> ids;
  udf_search_params sp{};
  udf_tensor qv{};
  double read_ms = 0, load_ms = 0, index_ms = 0, search_ms = 0;
};

// Stage 1: the command line, checked before any file is read or GPU touched.
Expected<void> check_command_line(Run& run) {
  const UdfRunConfig& cfg = run.cfg;
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
  if (!cfg.out && !cfg.check)
    use("no output: the search's results would be neither written nor checked; pass --out FILE.npy|.json to write "
        "them, --check to print recall@k, or both");
  if (cfg.out && !ends_with(*cfg.out, ".npy") && !ends_with(*cfg.out, ".json"))
    use(fmt::format("--out '{}': the output must be a .npy or .json file", *cfg.out));
  for (const auto& [list, out, flag] : {std::tuple{&cfg.captures, &run.specs, "--capture"},
                                        std::tuple{&cfg.filter_captures, &run.fspecs, "--filter-capture"}}) {
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
  const bool rows = cfg.exact || cfg.refine;
  if (cfg.exact && cfg.refine) use("--exact and --refine exclude each other (--refine FILE re-ranks given candidates)");
  if (rows && (cfg.index || cfg.save_index || cfg.load_index || cfg.devices))
    use(fmt::format("{} searches the dataset itself, with no index: drop --index, --save-index, --load-index and --devices",
                    cfg.exact ? "--exact" : "--refine"));
  if (cfg.exact && cfg.check) use("--exact is the exact answer: --check has nothing to compare it with");
  if (cfg.coarse_weights && (cfg.load_index || rows))
    use(fmt::format("--coarse-weights applies to a new index: {} builds none (a loaded index has its own)",
                    cfg.load_index ? "--load-index" : cfg.exact ? "--exact" : "--refine"));
  if (cfg.devices && cfg.device)
    use("--device and --devices exclude each other (--device N: one GPU; --devices N,N,...: the index sharded over several)");
  if (cfg.devices) {
    auto d = parse_device_list(*cfg.devices);
    if (!d) usage.insert(usage.end(), d.error().diagnostics().begin(), d.error().diagnostics().end());
    else run.devices = d.take();
  }
  if (cfg.shard_layout) {
    if (!cfg.devices) use("--shard-layout needs --devices N,N,... (it says how the devices split the index)");
    auto l = parse_shard_layout(*cfg.shard_layout);
    if (!l) usage.insert(usage.end(), l.error().diagnostics().begin(), l.error().diagnostics().end());
    else run.shard_layout = *l;
  }
  if (!usage.empty()) return Error(ErrorKind::Usage, std::move(usage));
  return {};
}

// Stage 2: every input file, before the GPU, so that bad files fail the same
// with or without one.  Every unreadable file is reported.
Expected<void> read_inputs(Run& run) {
  const UdfRunConfig& cfg = run.cfg;
  std::vector<Diagnostic> errs;
  auto collect = [&](const Error& e) { errs.insert(errs.end(), e.diagnostics().begin(), e.diagnostics().end()); };
  {
    auto b = read_file(cfg.module, limits::kModule);
    if (!b) collect(b.error());
    else if (auto m = parse_module(*b, cfg.module); !m) collect(m.error());
    else run.module_bytes = b.take();
  }
  if (cfg.dataset && !cfg.load_index) {
    auto d = read_vector_file(*cfg.dataset);
    if (d) run.data = d.take(); else collect(d.error());
  }
  auto q = read_vector_file(cfg.queries);
  if (q) run.queries = q.take(); else collect(q.error());
  if (cfg.refine) {
    auto c = read_vector_file(*cfg.refine);
    if (!c) collect(c.error());
    else if (c->dtype != DType::I64)
      errs.push_back(Diagnostic(DiagCode::InputMismatch, fmt::format("--refine {}: candidates must be int64 row numbers, "
                                                                     "found {}", *cfg.refine, to_string(c->dtype))));
    else
      run.candidates = c.take();
  }
  if (cfg.coarse_weights && !cfg.load_index) {
    auto w = read_vector_file(*cfg.coarse_weights);
    if (!w) collect(w.error());
    else if (w->dtype != DType::F32 || (w->rows != 1 && w->cols != 1))
      errs.push_back(Diagnostic(DiagCode::InputMismatch, fmt::format("--coarse-weights {}: expected a 1-D f32 array, found {} "
                                                                     "{} x {}", *cfg.coarse_weights, to_string(w->dtype),
                                                                     w->rows, w->cols)));
    else
      run.coarse_weights = w.take();
  }
  read_capture_files(run.specs, run.caps, errs);
  read_capture_files(run.fspecs, run.fcaps, errs);
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  if (cfg.coarse_weights && !cfg.load_index && run.coarse_weights.rows * run.coarse_weights.cols != run.data.cols)
    return diagnosed(DiagCode::InputMismatch, fmt::format("--coarse-weights {}: {} weights; the dataset {} has dimension {}",
                                                          *cfg.coarse_weights, run.coarse_weights.rows * run.coarse_weights.cols,
                                                          *cfg.dataset, run.data.cols));
  if (cfg.refine && run.candidates.rows != run.queries.rows)
    return diagnosed(DiagCode::InputMismatch, fmt::format("--refine {}: {} rows of candidates for {} queries ({})", *cfg.refine,
                                                          run.candidates.rows, run.queries.rows, cfg.queries));
  if (!cfg.load_index && run.queries.cols != run.data.cols)
    return diagnosed(DiagCode::InputMismatch, fmt::format("{}: queries have dimension {}, the dataset {} has {}", cfg.queries, run.queries.cols,
                                 *cfg.dataset, run.data.cols));
  for (const auto& [list, flag] : {std::pair{&run.caps, "--capture"}, std::pair{&run.fcaps, "--filter-capture"}})
    for (auto& c : *list)
      if (c.is_array && !c.array.one_d && c.array.rows != 1 && c.array.cols != 1)
        return diagnosed(DiagCode::InputMismatch,
                         fmt::format("{} {}: expected a 1-D array, found {} x {}", flag, c.name, c.array.rows, c.array.cols));
  run.read_ms = ms_since(run.t0);
  return {};
}

// Stage 3: the GPU: one runtime, and the module loaded by it, per distinct
// device.  With --devices, shard_modules[i] is the module of the i-th listed
// device: a device listed twice passes its one module twice (runtime.h,
// "several GPUs": a device may appear more than once).  Then the metric.
Expected<void> load_modules(Run& run) {
  const UdfRunConfig& cfg = run.cfg;
  auto t1 = Clock::now();
  run.sharded = !run.devices.empty();
  if (!run.sharded) run.devices.push_back(cfg.device.value_or(0));
  for (std::int32_t d : run.devices) {
    auto g = std::find_if(run.gpus.begin(), run.gpus.end(), [&](const auto& x) { return x->ordinal == d; });
    if (g == run.gpus.end()) {
      auto x = std::make_unique<OnDevice>();
      x->ordinal = d;
      const std::string on = run.sharded ? fmt::format(" on device {}", d) : std::string();
      UDF_RT(udf_runtime_create(d, &x->rt.p), "cannot start the runtime" + on);
      UDF_RT(udf_runtime_device_info(x->rt.p, &x->info), "udf_runtime_device_info");
      UDF_RT(udf_module_load_memory(x->rt.p, run.module_bytes.data(), run.module_bytes.size(), cfg.module.c_str(), &x->mod.p),
             "cannot load module " + cfg.module + on);
      run.gpus.push_back(std::move(x));
      g = run.gpus.end() - 1;
    }
    run.shard_modules.push_back((*g)->mod.p);
  }
  run.home = run.gpus.front()->mod.p;
  size_t n_metrics = 0;
  UDF_RT(udf_module_metric_count(run.home, &n_metrics), "udf_module_metric_count");
  if (cfg.metric) {
    UDF_RT(udf_module_find_metric(run.home, cfg.metric->c_str(), &run.mi), cfg.module);
  } else if (n_metrics != 1) {
    std::string names;
    for (size_t i = 0; i < n_metrics; ++i) {
      udf_metric_info info{};
      if (udf_module_metric_info(run.home, i, &info) == UDF_OK) names += std::string(names.empty() ? "" : ", ") + info.symbol;
    }
    return usage_error(DiagCode::Usage, fmt::format("{} holds {} metrics ({}): choose one with --metric", cfg.module, n_metrics, names));
  }
  UDF_RT(udf_module_metric_info(run.home, run.mi, &run.metric), "udf_module_metric_info");
  run.metric_name = run.metric.symbol;
  run.elem = to_dtype(run.metric.elem);
  run.load_ms = ms_since(t1);
  return {};
}

// Element types: files hold f32 / u8 / ...; the metric says what the index stores.
Expected<void> convert_vectors(Run& run) {
  const UdfRunConfig& cfg = run.cfg;
  if (!cfg.load_index) {
    auto c = convert(run.data, run.elem, *cfg.dataset);
    if (!c) return std::move(c.error()).note(fmt::format("metric {} stores {} elements", run.metric_name, to_string(run.elem)));
    run.data = c.take();
  }
  auto c = convert(run.queries, run.elem, cfg.queries);
  if (!c) return std::move(c.error()).note(fmt::format("metric {} stores {} elements", run.metric_name, to_string(run.elem)));
  run.queries = c.take();
  return {};
}

// Captures: every declared one of the metric and the filter bound, no
// unknown ones, types converted; every problem is reported.
Expected<void> bind_all_captures(Run& run) {
  const UdfRunConfig& cfg = run.cfg;
  std::vector<Diagnostic> errs;
  std::vector<CaptureDecl> declared;
  for (uint32_t i = 0; i < run.metric.n_captures; ++i) {
    udf_capture_info ci{};
    UDF_RT(udf_module_capture_info(run.home, run.mi, i, &ci), "udf_module_capture_info");
    declared.push_back(CaptureDecl{ci.name, ci.type, ci.is_array != 0});
  }
  bind_captures("metric " + run.metric_name, declared, run.caps, run.specs, "--capture", errs);
  if (cfg.filter) {
    size_t f = 0;
    UDF_RT(udf_module_find_filter(run.home, cfg.filter->c_str(), &f), cfg.module);
    udf_filter_info finfo{};
    UDF_RT(udf_module_filter_info(run.home, f, &finfo), "udf_module_filter_info");
    std::vector<CaptureDecl> fdecl;
    for (uint32_t i = 0; i < finfo.n_captures; ++i) {
      udf_capture_info ci{};
      UDF_RT(udf_module_filter_capture_info(run.home, f, i, &ci), "udf_module_filter_capture_info");
      fdecl.push_back(CaptureDecl{ci.name, ci.type, ci.is_array != 0});
    }
    bind_captures("filter " + *cfg.filter, fdecl, run.fcaps, run.fspecs, "--filter-capture", errs);
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  for (const auto& b : run.caps) run.bindings.push_back(b.binding);
  for (const auto& b : run.fcaps) run.fbindings.push_back(b.binding);
  return {};
}

// A new index's coarse weights: --coarse-weights, else the value bound to the
// capture the metric names as its coarse weights (udfc --coarse-weights),
// else none.
Expected<const float*> build_weights(Run& run) {
  if (run.cfg.coarse_weights) return run.coarse_weights.as<float>();
  int32_t c = -1;
  UDF_RT(udf_module_metric_coarse_weights(run.home, run.mi, &c), "udf_module_metric_coarse_weights");
  if (c < 0) return nullptr;
  udf_capture_info ci{};
  UDF_RT(udf_module_capture_info(run.home, run.mi, static_cast<size_t>(c), &ci), "udf_module_capture_info");
  for (auto& b : run.caps) {
    if (b.name != ci.name) continue;
    if (b.array.rows * b.array.cols != run.data.cols)
      return diagnosed(DiagCode::InputMismatch, fmt::format("--capture {}: {} values; metric {} takes its coarse weights "
                                                            "from it, so it needs one a dimension ({})", b.name,
                                                            b.array.rows * b.array.cols, run.metric_name, run.data.cols));
    return b.array.as<float>();
  }
  return nullptr;  // not reached: every capture is bound before the index
}

// Stage 4: the index, loaded or built (on one device or sharded over several).
Expected<void> make_index(Run& run, const UdfRunProgress& progress_fn) {
  const UdfRunConfig& cfg = run.cfg;
  auto t2 = Clock::now();
  if (cfg.load_index && run.sharded) {
    UDF_RT(udf_index_load_sharded_layout(run.shard_modules.data(), run.shard_modules.size(), cfg.index->c_str(),
                                         run.shard_layout, &run.ix.p),
           "cannot load index " + *cfg.index + " onto devices " + *cfg.devices);
  } else if (cfg.load_index) {
    UDF_RT(udf_index_load(run.home, cfg.index->c_str(), &run.ix.p), "cannot load index " + *cfg.index);
  } else {
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = cfg.n_lists;
    p.kmeans_iters = cfg.kmeans_iters;
    p.kmeans_mesoclusters = cfg.kmeans_mesoclusters;
    UDF_TRY(weights, build_weights(run));
    p.coarse_weights = weights;
    p.shard_layout = run.shard_layout;
    if (cfg.progress && progress_fn) {
      p.progress = &Progress::call;
      p.progress_user = &run.prog;
    }
    udf_tensor dv = view(run.data);
    if (run.sharded)
      UDF_RT(udf_index_build_sharded(run.shard_modules.data(), run.shard_modules.size(), run.metric_name.c_str(), &dv,
                                     nullptr, &p, &run.ix.p),
             "cannot build the index over devices " + *cfg.devices);
    else
      UDF_RT(udf_index_build(run.home, run.metric_name.c_str(), &dv, nullptr, &p, &run.ix.p), "cannot build the index");
  }
  run.index_ms = ms_since(t2);
  UDF_RT(udf_index_info_get(run.ix.p, &run.info), "udf_index_info_get");
  return {};
}

// The shard plan: the layout, each device's lists (by lists) or part of
// every list (by vectors) and its vectors, and how their top-k meet on the first.
Expected<void> describe_shards(Run& run) {
  if (!run.sharded) return {};
  size_t n_shards = 0;
  UDF_RT(udf_index_shard_count(run.ix.p, &n_shards), "udf_index_shard_count");
  for (size_t i = 0; i < n_shards; ++i) {
    udf_shard_info si{};
    UDF_RT(udf_index_shard_info(run.ix.p, i, &si), "udf_index_shard_info");
    const char* layout = shard_layout_name(si.layout);
    if (i == 0)
      run.plan += fmt::format("udf-run: shard layout: {}{}\n", layout ? layout : fmt::format("{}?", si.layout),
                              si.layout == UDF_SHARD_BY_VECTORS   ? " (each device keeps an equal part of every list)"
                              : si.layout == UDF_SHARD_BY_LISTS ? " (each device keeps a contiguous range of whole lists)"
                                                                : "");
    if (si.layout == UDF_SHARD_BY_VECTORS)
      run.plan += fmt::format("udf-run: shard {}: device {}, part {} of {} of every list ({}), {} vectors\n", i, si.device,
                              i + 1, n_shards, si.list_end - si.list_begin, si.size);
    else
      run.plan += fmt::format("udf-run: shard {}: device {}, lists [{}, {}) ({}), {} vectors\n", i, si.device,
                              si.list_begin, si.list_end, si.list_end - si.list_begin, si.size);
  }
  const char* transport = udf_index_shard_transport(run.ix.p);
  run.plan += fmt::format("udf-run: shard transport: {} (top-k merged on device {})\n", transport ? transport : "?",
                          run.devices.front());
  return {};
}

// Stage 5: the search.
Expected<void> search(Run& run, UdfRunResult& r) {
  const UdfRunConfig& cfg = run.cfg;
  run.n = run.queries.rows;
  run.k = cfg.k;
  const std::uint64_t n = run.n;
  const std::uint32_t k = run.k;
  run.dist.resize(n * k);
  run.ids.resize(n * k);
  udf_search_params& sp = run.sp;
  udf_search_params_default(&sp);
  sp.k = k;
  sp.n_probes = cfg.exact || cfg.refine ? 1 : std::min(cfg.n_probes, run.info.n_lists);
  sp.captures = run.bindings.data();
  sp.n_captures = run.bindings.size();
  if (cfg.filter) {
    sp.filter = cfg.filter->c_str();
    sp.filter_captures = run.fbindings.data();
    sp.n_filter_captures = run.fbindings.size();
  }
  run.qv = view(run.queries);
  udf_tensor dt{run.dist.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, static_cast<int64_t>(n), k, 0};
  udf_tensor it{run.ids.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, static_cast<int64_t>(n), k, 0};
  auto t3 = Clock::now();
  if (cfg.exact || cfg.refine) {
    udf_tensor dv = view(run.data);
    if (cfg.exact) {
      UDF_RT(udf_exact_search(run.home, run.metric_name.c_str(), &dv, &run.qv, &sp, &dt, &it), "exact search failed");
    } else {
      udf_tensor cv = view(run.candidates);
      UDF_RT(udf_refine(run.home, run.metric_name.c_str(), &dv, &run.qv, &cv, &sp, &dt, &it), "refine failed");
    }
    run.search_ms = ms_since(t3);
    return {};
  }
  UDF_RT(udf_index_search(run.ix.p, &run.qv, &sp, &dt, &it), "search failed");
  run.search_ms = ms_since(t3);
  if (cfg.n_probes > run.info.n_lists)
    r.warnings.push_back(Diagnostic(DiagCode::SearchAdjusted, fmt::format("--n-probes {} > n_lists {}: probing all lists", cfg.n_probes, run.info.n_lists)));
  return {};
}

// Stage 6: the outputs: JSON, or the ids' .npy with the distances' beside it.
Expected<void> write_outputs(const Run& run) {
  const UdfRunConfig& cfg = run.cfg;
  if (!cfg.out) return {};
  if (ends_with(*cfg.out, ".json")) {
    UDF_TRY_VOID(write_file_atomic(*cfg.out, render_json(run.metric_name, run.k, run.n, run.ids, run.dist)));
    return {};
  }
  HostMatrix im{DType::I64, run.n, run.k, false, {}};
  im.data.resize(run.ids.size() * 8);
  std::memcpy(im.data.data(), run.ids.data(), im.data.size());
  HostMatrix dm{DType::F32, run.n, run.k, false, {}};
  dm.data.resize(run.dist.size() * 4);
  std::memcpy(dm.data.data(), run.dist.data(), dm.data.size());
  std::string dpath = cfg.out->substr(0, cfg.out->size() - 4) + ".distances.npy";
  UDF_TRY_VOID(write_npy(*cfg.out, im));
  UDF_TRY_VOID(write_npy(dpath, dm));
  return {};
}

// Stage 7, --check: the same UDF with every list probed is an exact search
// under the same metric; recall@k = shared ids / reference ids.
Expected<void> check_recall(Run& run, UdfRunResult& r) {
  const std::uint64_t n = run.n;
  const std::uint32_t k = run.k;
  std::vector<float> rdist(n * k);
  std::vector<std::int64_t> rids(n * k);
  udf_tensor rdt{rdist.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, static_cast<int64_t>(n), k, 0};
  udf_tensor rit{rids.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, static_cast<int64_t>(n), k, 0};
  udf_search_params ep = run.sp;
  ep.n_probes = run.info.n_lists;
  auto t4 = Clock::now();
  if (run.cfg.refine) {  // the refined candidates against the exact answer
    udf_tensor dv = view(run.data);
    UDF_RT(udf_exact_search(run.home, run.metric_name.c_str(), &dv, &run.qv, &ep, &rdt, &rit), "exact reference search failed");
  } else {
    UDF_RT(udf_index_search(run.ix.p, &run.qv, &ep, &rdt, &rit), "exhaustive reference search failed");
  }
  auto ref_ms = ms_since(t4);
  std::uint64_t hits = 0, total = 0;
  for (std::uint64_t qi = 0; qi < n; ++qi) {
    std::unordered_set<std::int64_t> ref;
    for (std::uint32_t j = 0; j < k; ++j)
      if (rids[qi * k + j] >= 0) ref.insert(rids[qi * k + j]);
    total += ref.size();
    for (std::uint32_t j = 0; j < k; ++j) hits += run.ids[qi * k + j] >= 0 && ref.count(run.ids[qi * k + j]);
  }
  r.recall = total ? static_cast<double>(hits) / static_cast<double>(total) : 1.0;
  r.out += fmt::format("recall@{}: {:.3f}\n", k, r.recall);
  r.verbose_log += run.cfg.refine ? fmt::format("udf-run: reference: exact search in {:.1f} ms\n", ref_ms)
                                  : fmt::format("udf-run: reference: exhaustive search (n_probes = n_lists = {}) in {:.1f} ms\n",
                                                run.info.n_lists, ref_ms);
  return {};
}

// The summary line (and the shard plan) and the timings of the verbose log.
// On one GPU: "NAME (sm_90)"; sharded: "devices 0,1 (NAME (sm_90))", each
// distinct GPU named once.
void summarize(const Run& run, UdfRunResult& r) {
  const UdfRunConfig& cfg = run.cfg;
  const udf_device_info& dev = run.gpus.front()->info;
  std::string where = fmt::format("{} (sm_{})", dev.name, dev.arch);
  if (run.sharded) {
    std::vector<std::string> names;
    for (const auto& g : run.gpus) {
      std::string d = fmt::format("{} (sm_{})", g->info.name, g->info.arch);
      if (std::find(names.begin(), names.end(), d) == names.end()) names.push_back(std::move(d));
    }
    where = fmt::format("devices {} ({})", fmt::join(run.devices, ","), fmt::join(names, ", "));
  }
  const double search_ms = run.search_ms;
  if (cfg.exact || cfg.refine) {
    r.summary = fmt::format("udf-run: {}{} on {}: {} over {} x {} {} rows; {} queries{}, k {} in {:.2f} ms ({:.0f} QPS)\n",
                            run.metric_name, cfg.filter ? " where " + *cfg.filter : std::string(), where,
                            cfg.exact ? "exact search" : "refine", run.data.rows, run.data.cols, to_string(run.elem), run.n,
                            cfg.refine ? fmt::format(" x {} candidates", run.candidates.cols) : std::string(), run.k,
                            search_ms, search_ms > 0 ? static_cast<double>(run.n) / (search_ms / 1e3) : 0.0);
  } else {
    r.summary = fmt::format("udf-run: {}{} on {}: index {} x {} {} in {} lists {} in {:.1f} ms; {} queries, k {}, "
                            "n_probes {} in {:.2f} ms ({:.0f} QPS)\n",
                            run.metric_name, cfg.filter ? " where " + *cfg.filter : std::string(), where, run.info.size,
                            run.info.dim, to_string(run.elem), run.info.n_lists, cfg.load_index ? "loaded" : "built",
                            run.index_ms, run.n, run.k, run.sp.n_probes, search_ms,
                            search_ms > 0 ? static_cast<double>(run.n) / (search_ms / 1e3) : 0.0) +
                run.plan;
  }
  r.verbose_log = fmt::format("udf-run: read inputs in {:.1f} ms; {} in {:.1f} ms\n", run.read_ms,
                              run.gpus.size() > 1 ? fmt::format("{} runtimes + modules", run.gpus.size())
                                                  : "runtime + module",
                              run.load_ms) +
                  r.verbose_log;
}

}  // namespace

Expected<UdfRunResult> run_udf_run(const UdfRunConfig& cfg, const UdfRunProgress& progress_fn) {
  UdfRunResult r;
  Run run(cfg, progress_fn);
  UDF_TRY_VOID(check_command_line(run));
  UDF_TRY_VOID(read_inputs(run));
  UDF_TRY_VOID(load_modules(run));
  UDF_TRY_VOID(convert_vectors(run));
  UDF_TRY_VOID(bind_all_captures(run));
  const bool rows = cfg.exact || cfg.refine;
  if (!rows) UDF_TRY_VOID(make_index(run, progress_fn));
  UDF_TRY_VOID(describe_shards(run));
  if (cfg.load_index && run.info.dim != run.queries.cols)
    return diagnosed(DiagCode::InputMismatch, fmt::format("{}: queries have dimension {}, the index {} has {}", cfg.queries,
                                                          run.queries.cols, *cfg.index, run.info.dim));
  if (cfg.save_index) UDF_RT(udf_index_save(run.ix.p, cfg.index->c_str()), "cannot save the index");
  UDF_TRY_VOID(search(run, r));
  UDF_TRY_VOID(write_outputs(run));
  if (cfg.check) UDF_TRY_VOID(check_recall(run, r));
  summarize(run, r);
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
