#include "udf/driver/udfc.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "udf/artifact/artifact.h"
#include "udf/artifact/module.h"
#include "udf/compile/cuda.h"
#include "udf/compile/ir.h"
#include "udf/cudalibs/nvfatbin.h"
#include "udf/cudalibs/nvjitlink.h"
#include "udf/support/cache.h"
#include "udf/support/cmdline.h"
#include "udf/support/cuda_libs.h"
#include "udf/support/version.h"
#include "outputs.h"
#include "tool_cache.h"

namespace udf {

Expected<UdfMetadata> udfc_metadata(const UdfcConfig& cfg) {
  UdfMetadata m;
  std::vector<Diagnostic> errs;
  auto fail = [&](const Error& e) { errs.insert(errs.end(), e.diagnostics().begin(), e.diagnostics().end()); };
  auto bad = [&](std::string s) { errs.push_back(Diagnostic(DiagCode::InvalidOptionValue, std::move(s))); };
  if (cfg.kind) {
    if (auto k = parse_udf_kind(*cfg.kind)) m.kind = *k;
    else bad(fmt::format("unknown --kind '{}' (choose metric, filter)", *cfg.kind));
  }
  if (m.kind == UdfKind::Filter) {
    // A filter is a predicate: the metric's types, order and finalize mean nothing for it.
    const std::pair<const char*, bool> metric_only[] = {
        {"--elem", cfg.elem.has_value()},       {"--acc", cfg.acc.has_value()},
        {"--order", cfg.order.has_value()},     {"--initial", cfg.initial.has_value()},
        {"--coarse-metric", cfg.coarse_metric.has_value()}, {"--finalize", cfg.finalize.has_value()},
        {"--monotone", cfg.monotone}, {"--coarse-weights", cfg.coarse_weights.has_value()}};
    for (const auto& [flag, given] : metric_only)
      if (given) errs.push_back(Diagnostic(DiagCode::Usage, fmt::format("{} does not apply to a filter (--kind filter): "
                                                                        "it is a metric's setting", flag)));
  }
  if (cfg.abi) {
    if (*cfg.abi == "v1" || *cfg.abi == "1") m.metric_abi = 1;
    else if (*cfg.abi == "v2" || *cfg.abi == "2") m.metric_abi = 2;
    else bad(fmt::format("unknown --abi '{}' (choose v1, v2)", *cfg.abi));
  }
  if (cfg.shape) {
    if (auto s = parse_metric_shape(*cfg.shape)) m.shape = *s;
    else bad(fmt::format("unknown --shape '{}' (choose state, vector)", *cfg.shape));
    if (!cfg.abi) m.metric_abi = 2;  // a shape is ABI v2
  }
  m.symbol = cfg.symbol;
  m.finalize = cfg.finalize;
  m.monotone = cfg.monotone;
  if (m.kind == UdfKind::Metric) m.coarse_weights = cfg.coarse_weights;
  const std::string elem = cfg.elem.value_or("f32"), order = cfg.order.value_or("min"),
                    coarse = cfg.coarse_metric.value_or("l2");
  if (auto e = parse_elem_type(elem)) m.elem = *e;
  else bad(fmt::format("unknown --elem '{}' (choose f32, f16, i8, u8)", elem));
  if (cfg.acc) {
    if (auto a = parse_acc_type(*cfg.acc)) m.acc = *a;
    else bad(fmt::format("unknown --acc '{}' (choose f32, i32)", *cfg.acc));
  }
  if (auto o = parse_order(order)) m.order = *o;
  else bad(fmt::format("unknown --order '{}' (choose min, max)", order));
  if (auto c = parse_coarse_metric(coarse)) m.coarse_metric = *c;
  else bad(fmt::format("unknown --coarse-metric '{}' (choose l2, inner_product, cosine)", coarse));
  for (const auto& d : cfg.defines)
    if (d.empty() || d[0] == '=' || d[0] == '-')
      bad(fmt::format("bad -D '{}': expected NAME or NAME=VALUE", d));
  for (const auto& spec : cfg.captures) {
    auto c = parse_capture(spec);
    if (c) m.captures.push_back(*c);
    else fail(c.error());
  }
  if (auto archs = parse_arch_lists(cfg.archs)) m.archs = std::move(*archs);
  else fail(archs.error());
  if (errs.empty() && cfg.initial && m.v2()) {
    auto v = parse_initial_state(*cfg.initial, m.acc_type());
    if (v) m.initial_state = *v;
    else fail(v.error());
  } else if (errs.empty() && cfg.initial) {
    auto v = parse_initial(*cfg.initial, m.acc_type());
    if (v) m.initial = *v;
    else fail(v.error());
  }
  if (errs.empty()) {
    if (auto v = validate(m); !v) fail(v.error());
  }
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  return m;
}

namespace {

std::string kind_from_extension(const std::string& path) {
  auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".cu" || ext == ".cuh") return "cuda";
  if (ext == ".mlir") return "mlir";
  if (ext == ".ll" || ext == ".bc") return "llvm";
  if (ext == ".ltoir") return "ltoir";
  return "";
}

// The files an IR compile reads besides its input: libdevice (MLIR, LLVM IR).
std::vector<std::string> ir_dependencies(const std::string& kind) {
  if (kind == "mlir" || kind == "llvm") return ir_frontend_dependencies();
  return {};
}

Expected<UdfcResult> inspect(const std::string& path) {
  static_assert(limits::kArtifact.max_bytes == limits::kModule.max_bytes, "--inspect reads either");
  UDF_TRY(bytes, read_file(path, limits::kArtifact));
  auto kind = sniff_container(bytes);
  if (kind == ContainerKind::Module) {
    UDF_TRY(mod, parse_module(bytes, path));
    return UdfcResult{to_json(mod.manifest), {}, {}};
  }
  UDF_TRY(art, parse_artifact(bytes, path));
  return UdfcResult{to_json(art.manifest), {}, {}};
}

// What a compile is of, for the watchdog's message: "compiling 'wl2.cu'".
std::string compile_subject(const UdfcConfig& cfg) {
  if (cfg.source_string) return "compiling <string>";
  std::string names;
  for (const auto& in : cfg.inputs) names += (names.empty() ? "" : ", ") + (in == "-" ? "<stdin>" : "'" + in + "'");
  return "compiling " + names;
}

// Every input kind: look the key up in the cache (unless `cacheable` is
// false); on a miss compile.  The artifact and its depfile are written
// together, atomically, and the artifact is stored in the cache.
Expected<UdfcResult> compile_cached(const UdfcConfig& cfg, const std::string& key, bool cacheable, DependencyList deps,
                                    const std::function<Expected<CompileOutput>()>& compile) {
  UdfcResult r;
  detail::ToolCache cache("udfc", cfg.no_cache || !cacheable, cfg.cache_dir, r.warnings);
  auto valid = [&](const Bytes& b) {
    auto art = parse_artifact(b, "cache entry " + key);
    return art && art->manifest.cache_key == key;
  };
  if (auto hit = cache.lookup(key, valid, r.verbose_log)) {
    UDF_TRY_VOID(detail::write_outputs({{*cfg.output, std::move(*hit)}}, cfg.depfile, deps));
    r.verbose_log += fmt::format("udfc: cache hit {} -> {}\n", key, *cfg.output);
    return r;
  }
  auto compiled = [&] {
    // Checked by run_udfc before anything else.
    auto limits = resolve_compile_limits(cfg.compile_timeout, cfg.compile_memory_limit);
    CompileWatchdog watchdog(limits ? *limits : CompileLimits{}, compile_subject(cfg), cfg.on_compile_limit);
    return compile();
  }();
  if (!compiled) return std::move(compiled.error());
  Bytes bytes = serialize_artifact(compiled->artifact);
  deps.add_all(compiled->dependencies);
  UDF_TRY_VOID(detail::write_outputs({{*cfg.output, bytes}}, cfg.depfile, deps));
  cache.store(key, bytes);
  r.warnings.insert(r.warnings.end(), compiled->warnings.begin(), compiled->warnings.end());
  r.verbose_log += compiled->raw_log;
  r.verbose_log += fmt::format("udfc: wrote {} ({} bytes, {} arch{}, symbol {})\n", *cfg.output, bytes.size(),
                               compiled->artifact.ltoir.size(), compiled->artifact.ltoir.size() == 1 ? "" : "s",
                               compiled->artifact.manifest.symbol);
  if (cfg.depfile.enabled)
    r.verbose_log += fmt::format("udfc: wrote {} ({} dependencies)\n",
                                 cfg.depfile.path.empty() ? *cfg.output + ".d" : cfg.depfile.path, deps.paths().size());
  return r;
}

// Where a compiler library's version for a cache key is remembered (the
// tool's memo cache, <cache>/memo; disabled with the cache): a cache hit then loads no NVRTC or libNVVM,
// whose loading would be most of its time.
Cache version_memo(const UdfcConfig& cfg) { return cfg.no_cache ? Cache::disabled() : Cache::memo(cfg.cache_dir); }

// MLIR, LLVM IR and LTO-IR: the same cache discipline as CUDA (key from
// the inputs, looked up before compiling).
Expected<UdfcResult> run_ir(const UdfcConfig& cfg, const std::string& kind, const UdfMetadata& meta) {
  std::vector<IrSource> srcs;
  DependencyList deps;
  if (cfg.source_string) {
    IrSource src;
    src.bytes.assign(cfg.source_string->begin(), cfg.source_string->end());
    src.display_name = "<string>";
    srcs.push_back(std::move(src));
  } else {
    std::vector<Diagnostic> errs;
    for (const auto& in : cfg.inputs) {
      auto bytes = read_file(in, kind == "ltoir" ? limits::kLtoIr : limits::kIr);
      if (!bytes) {
        errs.insert(errs.end(), bytes.error().diagnostics().begin(), bytes.error().diagnostics().end());
        continue;
      }
      srcs.push_back(IrSource{bytes.take(), in == "-" ? "<stdin>" : in});
      deps.add(in);
    }
    if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  }
  deps.add_all(ir_dependencies(kind));
  const SourceKind sk = kind == "mlir" ? SourceKind::Mlir : kind == "llvm" ? SourceKind::LlvmIr : SourceKind::LtoIr;
  if (sk == SourceKind::LtoIr)
    return compile_cached(cfg, ltoir_cache_key(srcs, meta), true, std::move(deps), [&] { return compile_ltoir(srcs, meta); });
  const IrSource& src = srcs.front();
  Cache memo = version_memo(cfg);
  const std::string nvvm = remembered_library_version(CudaLibrary::Nvvm, memo, [] { return nvvm_version_string(); });
  return compile_cached(cfg, ir_cache_key(sk, src, meta, nvvm), true, std::move(deps), [&] {
    return sk == SourceKind::Mlir ? compile_mlir(src, meta) : compile_llvm_ir(src, meta);
  });
}

}  // namespace

Expected<UdfcResult> run_udfc(const UdfcConfig& cfg) {
  UDF_TRY_VOID(detail::check_depfile_options(cfg.depfile, !cfg.inspect && !cfg.print_prelude));
  if (cfg.inspect) {
    if (!cfg.inputs.empty() || cfg.source_string || cfg.output)
      return usage_error("--inspect takes only the file to inspect");
    return inspect(*cfg.inspect);
  }
  if (cfg.print_prelude) {
    // The prelude depends on the kind and the captures alone: no --arch needed.
    std::vector<Capture> caps;
    std::vector<Diagnostic> errs;
    for (const auto& spec : cfg.captures) {
      auto c = parse_capture(spec);
      if (c) caps.push_back(*c);
      else errs.insert(errs.end(), c.error().diagnostics().begin(), c.error().diagnostics().end());
    }
    UdfKind kind = UdfKind::Metric;
    if (cfg.kind) {
      if (auto k = parse_udf_kind(*cfg.kind)) kind = *k;
      else errs.push_back(Diagnostic(DiagCode::InvalidOptionValue, fmt::format("unknown --kind '{}' (choose metric, filter)", *cfg.kind)));
    }
    const int abi = cfg.shape || (cfg.abi && (*cfg.abi == "v2" || *cfg.abi == "2")) ? 2 : 1;
    if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
    return UdfcResult{cuda_prelude(caps, kind, abi), {}, {}};
  }
  if (!cfg.inputs.empty() && cfg.source_string) return usage_error("give either an INPUT file or -e SOURCE, not both");
  if (cfg.inputs.empty() && !cfg.source_string) return usage_error("no input: give a file, '-' for standard input, or -e SOURCE");
  if (!cfg.output) return usage_error("no output: pass -o FILE");
  UDF_TRY(meta, udfc_metadata(cfg));
  if (auto l = resolve_compile_limits(cfg.compile_timeout, cfg.compile_memory_limit); !l) return std::move(l.error());

  std::string kind = cfg.input_kind.value_or("");
  if (kind.empty()) {
    if (cfg.source_string || cfg.inputs.front() == "-") kind = "cuda";
    else kind = kind_from_extension(cfg.inputs.front());
    if (kind.empty())
      return usage_error(fmt::format("cannot tell the input kind of '{}' from its extension (.cu, .cuh, .mlir, "
                                     ".ll, .bc, .ltoir); pass --input-kind cuda|mlir|llvm|ltoir",
                                     cfg.inputs.front()));
  }
  if (kind != "cuda" && kind != "mlir" && kind != "llvm" && kind != "ltoir")
    return usage_error(fmt::format("unknown --input-kind '{}' (choose cuda, mlir, llvm, ltoir)", kind));
  if (cfg.inputs.size() > 1) {
    if (kind != "ltoir")
      return usage_error(fmt::format("{} inputs: only LTO-IR takes several (one per arch); {} input is one file",
                                     cfg.inputs.size(), kind == "cuda" ? "a CUDA" : kind == "mlir" ? "an MLIR" : "an LLVM IR"));
    for (const auto& in : cfg.inputs)
      if (in == "-" || (!cfg.input_kind && kind_from_extension(in) != "ltoir"))
        return usage_error(fmt::format("'{}': with several inputs every one must be an .ltoir file", in));
  }
  if (kind != "cuda") {
    if (!cfg.include_dirs.empty() || !cfg.defines.empty())
      return usage_error(fmt::format("-I and -D apply to CUDA sources only, not to input kind '{}'", kind));
    return run_ir(cfg, kind, meta);
  }

  CudaSource src;
  if (cfg.source_string) {
    src.text = *cfg.source_string;
    src.display_name = "<string>";
  } else {
    const std::string& input = cfg.inputs.front();
    UDF_TRY(bytes, read_file(input, limits::kCudaSource));
    src.text.assign(bytes.begin(), bytes.end());
    src.display_name = input == "-" ? "<stdin>" : input;
    if (input != "-") {
      auto dir = std::filesystem::path(input).parent_path();
      src.directory = dir.empty() ? "." : dir.string();
    }
  }
  CudaCompileOptions opts{cfg.include_dirs, cfg.defines, {}};
  opts.list_dependencies = cfg.depfile.enabled;  // the headers NVRTC read, for the depfile only
  // The cache maps the key of the inputs (computed before compiling) to the
  // artifact.  A computed #include (#include MACRO) names a header only the
  // compiler can find: such a source is compiled every time, so that its
  // artifact and depfile are always right.
  UDF_TRY(scan, scan_cuda_source(src, meta.captures, opts));
  DependencyList deps;
  if (!cfg.inputs.empty()) deps.add(cfg.inputs.front());
  deps.add_all(scan.headers);
  Cache memo = version_memo(cfg);
  const std::string nvrtc = remembered_library_version(CudaLibrary::Nvrtc, memo, [] { return nvrtc_version_string(); });
  auto r = compile_cached(cfg, cuda_cache_key(src, meta, opts, nvrtc), !scan.computed_include, std::move(deps),
                          [&] { return compile_cuda(src, meta, opts); });
  if (r && scan.computed_include)
    r->verbose_log += "udfc: not cached: the source has a computed #include (#include MACRO)\n";
  return r;
}

Expected<std::vector<std::string>> udfc_first_line_flags(const std::string& path) {
  if (path == "-") return usage_error("--flags-from-first-line needs an input file, not standard input");
  // The first line only: at most as much as a response file holds.
  UDF_TRY(bytes, read_file_head(path, limits::kResponseFile.max_bytes));
  const std::string_view head(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (auto flags = udfc_first_line_comment(head)) return split_gnu_command_line(*flags, path);  // errors at path:1
  // Binary input (LTO-IR, bitcode) cannot hold the comment: its flags are the command line's.
  if (head.substr(0, head.find('\n')).find('\0') != std::string_view::npos) return std::vector<std::string>{};
  // A text input without it: a mistyped or missing first line would
  // otherwise compile with no flags (the wrong order, no captures).
  const char* c = kind_from_extension(path) == "llvm" ? ";" : "//";
  return Error(ErrorKind::Usage,
               Diagnostic(DiagCode::Usage, path, 1, 0,
                          fmt::format("--flags-from-first-line: the first line is not a '{0} udfc: FLAGS' comment; begin "
                                      "the file with one, e.g. '{0} udfc: --capture w:f32[]' ('{0} udfc:' for no flags)",
                                      c)));
}

std::string udfc_version_report() {
  std::vector<LibraryStatus> libs = {
      nvrtc_library_status(),
      nvjitlink_library_status(),
      nvfatbin_library_status(),
      nvvm_library_status(),
      ir_frontend_library_status(),
  };
  return fmt::format("udfc {} (UDF ABI ivf_flat.metric.v1)\n", kUdfVersion) + detail::library_report(libs);
}

}  // namespace udf
