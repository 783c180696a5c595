#include "udf/driver/udf_link.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "udf/link/fatbin.h"
#include "udf/link/jitlink.h"
#include "udf/link/link.h"
#include "udf/compile/cuda.h"
#include "udf/compile/ir.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"
#include "outputs.h"
#include "tool_cache.h"

namespace udf {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string temp_name(const std::string& output, Arch a) { return fmt::format("{}.{}.cubin", output, arch_name(a)); }

std::string render_plan(const LinkPlan& plan, const KernelPack& pack, const std::string& output, EmitKind emit) {
  std::string s = fmt::format("kernel pack: {} ({})\n", pack.name, pack.dir);
  s += fmt::format("entry kernels: NVRTC {}\n", fmt::join(plan.wrapper_nvrtc_options, " "));
  for (const auto& e : plan.entries)
    s += fmt::format("  {}{}\n", e.name,
                     e.artifact ? fmt::format("  (artifact {}{}, {})", *e.artifact,
                                              e.filter ? fmt::format(", filter {}", *e.filter) : std::string(), e.variant)
                                : "");
  for (const auto& pa : plan.archs) {
    s += fmt::format("{}: nvJitLink {}\n", arch_name(pa.arch), fmt::join(pa.options, " "));
    for (const auto& [name, arch] : pa.inputs) s += fmt::format("  lto-ir {} ({})\n", name, arch_name(arch));
  }
  if (emit != EmitKind::Cubin) s += fmt::format("fatbin: {}, {} cubin(s)\n", plan.packager, plan.archs.size());
  s += fmt::format("output: {} ({})\n", output, emit == EmitKind::Module ? "module" : emit == EmitKind::Fatbin ? "fatbin" : "cubin");
  return s;
}

}  // namespace

Expected<UdfLinkResult> run_udf_link(const UdfLinkConfig& cfg) {
  auto t0 = Clock::now();
  UdfLinkResult r;
  std::vector<Diagnostic> usage;
  if (cfg.inputs.empty()) usage.push_back(Diagnostic(DiagCode::Usage, "no input artifacts"));
  if (!cfg.output && !cfg.dry_run) usage.push_back(Diagnostic(DiagCode::Usage, "no output: pass -o FILE"));
  if (auto d = detail::check_depfile_options(cfg.depfile, !cfg.dry_run); !d)
    usage.insert(usage.end(), d.error().diagnostics().begin(), d.error().diagnostics().end());
  EmitKind emit = EmitKind::Module;
  if (cfg.emit == "fatbin") emit = EmitKind::Fatbin;
  else if (cfg.emit == "cubin") emit = EmitKind::Cubin;
  else if (cfg.emit != "module")
    usage.push_back(Diagnostic(DiagCode::InvalidOptionValue, fmt::format("unknown --emit '{}' (choose module, fatbin, cubin)", cfg.emit)));
  auto archs = parse_arch_lists(cfg.archs);
  if (!archs) usage.insert(usage.end(), archs.error().diagnostics().begin(), archs.error().diagnostics().end());
  else if (archs->empty()) usage.push_back(Diagnostic(DiagCode::Usage, "no target arch: pass --arch (for example --arch sm_90)"));
  else if (emit == EmitKind::Cubin && archs->size() != 1)
    usage.push_back(Diagnostic(DiagCode::Usage, "--emit cubin writes one image: give exactly one --arch"));
  auto limits = resolve_compile_limits(cfg.compile_timeout, cfg.compile_memory_limit);
  if (!limits) usage.insert(usage.end(), limits.error().diagnostics().begin(), limits.error().diagnostics().end());
  if (!usage.empty()) return Error(ErrorKind::Usage, std::move(usage));

  // Read every input, reporting every bad one.
  std::vector<LinkArtifact> arts;
  std::vector<Diagnostic> errs;
  for (const auto& in : cfg.inputs) {
    auto bytes = read_file(in, limits::kArtifact);
    if (!bytes) { errs.insert(errs.end(), bytes.error().diagnostics().begin(), bytes.error().diagnostics().end()); continue; }
    auto a = parse_artifact(*bytes, in);
    if (!a) { errs.insert(errs.end(), a.error().diagnostics().begin(), a.error().diagnostics().end()); continue; }
    arts.push_back(LinkArtifact{in, std::move(*a), sha256_hex(*bytes)});
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  double read_ms = ms_since(t0);

  auto tp = Clock::now();
  UDF_TRY(pack, load_kernel_pack(cfg.kernel_pack_dir.value_or(default_kernel_pack_dir())));
  double pack_ms = ms_since(tp);
  UDF_TRY(plan, plan_link(arts, pack, *archs, cfg.pairs));
  if (cfg.dry_run) {
    r.out = render_plan(plan, pack, cfg.output.value_or("-"), emit);
    return r;
  }

  // Every file read: the artifacts and the kernel pack (its manifest and LTO-IR).
  DependencyList deps;
  for (const auto& in : cfg.inputs) deps.add(in);
  deps.add(pack.dir + "/" + kKernelPackManifest);
  for (const auto& f : pack.files) deps.add(pack.dir + "/" + f.name);

  const std::string key = link_cache_key(arts, pack, *archs, emit, cfg.pairs);
  // --save-temps needs the per-arch cubins, which only a real link makes.
  detail::ToolCache cache("udf-link", cfg.no_cache || cfg.save_temps, cfg.cache_dir, r.warnings);
  auto valid = [&](const Bytes& b) { return emit != EmitKind::Module || static_cast<bool>(parse_module(b, "cache entry " + key)); };
  if (auto hit = cache.lookup(key, valid, r.verbose_log)) {
    UDF_TRY_VOID(detail::write_outputs({{*cfg.output, std::move(*hit)}}, cfg.depfile, deps));
    r.verbose_log += fmt::format("udf-link: cache hit {} -> {} ({:.1f} ms)\n", key, *cfg.output, ms_since(t0));
    return r;
  }

  auto linked = [&] {
    std::string names;
    for (const auto& in : cfg.inputs) names += (names.empty() ? "" : ", ") + ("'" + in + "'");
    CompileWatchdog watchdog(*limits, "linking " + names, cfg.on_compile_limit);
    return run_link(arts, pack, plan, emit);
  }();
  if (!linked) return std::move(linked.error());
  auto out = linked.take();
  Bytes bytes;
  if (emit == EmitKind::Module) bytes = serialize_module(out.module);
  else if (emit == EmitKind::Fatbin) bytes = out.module.fatbin;
  else bytes = out.cubins.front().second;
  std::vector<detail::Output> outputs = {{*cfg.output, bytes}};
  if (cfg.save_temps)
    for (const auto& [arch, cubin] : out.cubins) outputs.push_back({temp_name(*cfg.output, arch), cubin});
  UDF_TRY_VOID(detail::write_outputs(outputs, cfg.depfile, deps));
  cache.store(key, bytes);

  r.warnings.insert(r.warnings.end(), out.warnings.begin(), out.warnings.end());
  std::string& v = r.verbose_log;
  v += fmt::format("udf-link: read {} artifact(s) in {:.1f} ms; kernel pack {} ({} variants, {} kernels) in {:.1f} ms\n",
                   arts.size(), read_ms, pack.name, pack.variants.size(), pack.kernels.size(), pack_ms);
  for (const auto& a : arts) {
    const auto& m = a.artifact.manifest;
    if (m.kind == UdfKind::Filter)
      v += fmt::format("udf-link:   {}: filter {} ({})\n", a.name, m.symbol, m.source_name);
    else
      v += fmt::format("udf-link:   {}: {} ({} {}/{} {}-ordered)\n", a.name, m.symbol, m.source_name, to_string(m.elem),
                       to_string(m.acc), to_string(m.order));
  }
  v += fmt::format("udf-link: entry kernels: {} compiled in {:.1f} ms\n", plan.entries.size(), out.timing.entries_compile_s * 1e3);
  for (std::size_t i = 0; i < out.timing.link_s.size(); ++i)
  {
    std::vector<std::string> shown;
    std::size_t used = 0;
    for (const auto& o : plan.archs[i].options) {
      if (o.rfind("-kernels-used=", 0) == 0) ++used;
      else shown.push_back(o);
    }
    v += fmt::format("udf-link: {}: {} ({} -kernels-used=... x{}) linked in {:.1f} ms, cubin {} bytes\n",
                     arch_name(out.timing.link_s[i].first), nvjitlink_version_string(), fmt::join(shown, " "), used,
                     out.timing.link_s[i].second * 1e3, out.cubins[i].second.size());
  }
  if (emit != EmitKind::Cubin)
    v += fmt::format("udf-link: fatbin ({}) {} bytes in {:.1f} ms\n", out.module.manifest.packager, out.module.fatbin.size(),
                     out.timing.fatbin_s * 1e3);
  if (!out.info_log.empty()) v += out.info_log;
  if (cfg.save_temps)
    for (const auto& [arch, cubin] : out.cubins) v += fmt::format("udf-link: kept {}\n", temp_name(*cfg.output, arch));
  v += fmt::format("udf-link: wrote {} ({} bytes) in {:.1f} ms total\n", *cfg.output, bytes.size(), ms_since(t0));
  return r;
}

std::string udf_link_version_report(const std::optional<std::string>& kernel_pack_dir) {
  auto fatbin = nvfatbin_info();
  std::vector<LibraryStatus> libs = {
      nvrtc_library_status(),
      nvjitlink_library_status(),
      LibraryStatus{"nvFatbin", fatbin.available, fatbin.path,
                    fatbin.version.rfind("nvfatbin ", 0) == 0 ? fatbin.version.substr(9) : fatbin.version, fatbin.why_not},
      nvvm_library_status(),
  };
  std::string dir = kernel_pack_dir.value_or(default_kernel_pack_dir());
  auto pack = load_kernel_pack(dir);
  libs.push_back(pack ? LibraryStatus{"kernel pack", true, dir, pack->name + " (" + pack->metric_abi_id + ")", {}}
                      : LibraryStatus{"kernel pack", false, dir, {}, pack.error().message()});
  return fmt::format("udf-link {}\n", kUdfVersion) + detail::library_report(libs);
}

}  // namespace udf
