#include "udf/driver/udf_link.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "udf/compile/cuda.h"
#include "udf/compile/ir.h"
#include "udf/cudalibs/nvfatbin.h"
#include "udf/cudalibs/nvjitlink.h"
#include "udf/link/link.h"
#include "udf/support/cache.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"
#include "outputs.h"
#include "tool_cache.h"

namespace udf {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// --save-temps: OUTPUT.ENTRY.sm_XX.cubin for a module's entries,
// OUTPUT.sm_XX.cubin for the one cubin an arch of --emit fatbin|cubin.
std::string temp_name(const std::string& output, const LinkPlan& plan, const LinkJob& job, EmitKind emit) {
  if (emit == EmitKind::Module) return fmt::format("{}.{}.{}.cubin", output, plan.entries[job.entries.front()].name, arch_name(job.arch));
  return fmt::format("{}.{}.cubin", output, arch_name(job.arch));
}

std::string render_plan(const LinkPlan& plan, const std::vector<LinkArtifact>& arts, const KernelPack& pack,
                        const std::string& output, EmitKind emit, unsigned threads) {
  std::string s = fmt::format("kernel pack: {} ({})\n", pack.name, pack.dir);
  s += fmt::format("k buckets: up to {}\n", plan.max_k);
  s += fmt::format("entry kernels: NVRTC {}\n", fmt::join(plan.wrapper_nvrtc_options, " "));
  for (const auto& e : plan.entries)
    s += fmt::format("  {}{}\n", e.name,
                     e.artifact ? fmt::format("  (artifact {}{}, {})", *e.artifact,
                                              e.filter ? fmt::format(", filter {}", *e.filter) : std::string(), e.variant)
                                : "");
  const auto jobs = link_jobs(plan, emit);
  for (Arch a : plan.archs) {
    s += fmt::format("{}: nvJitLink -arch=sm_{} {} {}\n", arch_name(a), a, fmt::join(plan.link_options, " "),
                     emit == EmitKind::Module ? "-kernels-used=ENTRY, one link an entry" : "-kernels-used=... (every entry)");
    // The inputs of the arch's links: the pack files, the wrappers, the UDFs.
    bool wrappers = false;
    std::set<int> used;
    for (const auto& j : jobs) {
      if (j.arch != a) continue;
      for (int e : j.entries) {
        const PlannedEntry& pe = plan.planned[e];
        wrappers = wrappers || !pe.wrapper.empty();
        if (pe.metric >= 0) used.insert(pe.metric);
        if (pe.filter >= 0) used.insert(pe.filter);
      }
    }
    for (const auto& f : plan_pack_files(plan, {}, a))  // each link takes the ones its entries use
      s += fmt::format("  lto-ir {} ({})\n", f, arch_name(pack_file(pack, f)->arch));
    if (wrappers) s += fmt::format("  lto-ir <entry kernels> ({})\n", arch_name(plan.wrapper_arch));
    for (int i : used)
      s += fmt::format("  lto-ir {} ({})\n", arts[i].name, arch_name(arts[i].artifact.payload_linking_into(a)->first));
  }
  const std::size_t E = plan.entries.size(), A = plan.archs.size();
  const std::string per = emit == EmitKind::Module
                              ? fmt::format("{} entr{} x {} arch{}, one link each", E, E == 1 ? "y" : "ies", A, A == 1 ? "" : "s")
                              : fmt::format("one an arch, of all {} entr{}", E, E == 1 ? "y" : "ies");
  s += fmt::format("links: {} ({}), up to {} at a time\n", jobs.size(), per, std::min<std::size_t>(threads, jobs.size()));
  if (emit == EmitKind::Module) s += fmt::format("fatbin: {}, {} image(s) of {} cubin(s)\n", plan.packager, E, A);
  else if (emit == EmitKind::Fatbin) s += fmt::format("fatbin: {}, {} cubin(s)\n", plan.packager, plan.archs.size());
  s += fmt::format("output: {} ({})\n", output, emit == EmitKind::Module ? "module" : emit == EmitKind::Fatbin ? "fatbin" : "cubin");
  return s;
}

// The command line, checked whole: every usage problem is reported.
struct LinkCommand {
  EmitKind emit = EmitKind::Module;
  std::vector<Arch> archs;
  CompileLimits limits;
};

Expected<LinkCommand> check_command_line(const UdfLinkConfig& cfg) {
  LinkCommand c;
  std::vector<Diagnostic> usage;
  if (cfg.inputs.empty()) usage.push_back(Diagnostic(DiagCode::Usage, "no input artifacts"));
  if (!cfg.output && !cfg.dry_run) usage.push_back(Diagnostic(DiagCode::Usage, "no output: pass -o FILE"));
  if (auto d = detail::check_depfile_options(cfg.depfile, !cfg.dry_run); !d)
    usage.insert(usage.end(), d.error().diagnostics().begin(), d.error().diagnostics().end());
  if (cfg.emit == "fatbin") c.emit = EmitKind::Fatbin;
  else if (cfg.emit == "cubin") c.emit = EmitKind::Cubin;
  else if (cfg.emit != "module")
    usage.push_back(Diagnostic(DiagCode::InvalidOptionValue, fmt::format("unknown --emit '{}' (choose module, fatbin, cubin)", cfg.emit)));
  auto archs = parse_arch_lists(cfg.archs);
  if (!archs) usage.insert(usage.end(), archs.error().diagnostics().begin(), archs.error().diagnostics().end());
  else if (archs->empty()) usage.push_back(Diagnostic(DiagCode::Usage, "no target arch: pass --arch (for example --arch sm_90)"));
  else if (c.emit == EmitKind::Cubin && archs->size() != 1)
    usage.push_back(Diagnostic(DiagCode::Usage, "--emit cubin writes one image: give exactly one --arch"));
  if (cfg.max_k && *cfg.max_k <= 0)
    usage.push_back(Diagnostic(DiagCode::InvalidOptionValue, fmt::format("--max-k {}: expected a k of 1 or more", *cfg.max_k)));
  if (cfg.jobs && *cfg.jobs <= 0)
    usage.push_back(Diagnostic(DiagCode::InvalidOptionValue, fmt::format("--jobs {}: expected 1 or more", *cfg.jobs)));
  auto limits = resolve_compile_limits(cfg.compile_timeout, cfg.compile_memory_limit);
  if (!limits) usage.insert(usage.end(), limits.error().diagnostics().begin(), limits.error().diagnostics().end());
  if (!usage.empty()) return Error(ErrorKind::Usage, std::move(usage));
  c.archs = archs.take();
  c.limits = limits.take();
  return c;
}

// Reads every input, reporting every bad one.
Expected<std::vector<LinkArtifact>> read_inputs(const UdfLinkConfig& cfg) {
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
  return arts;
}

// The links, each (an entry and arch, or an arch) cached on its own so that a
// module with one more metric or filter links only the new entries; the time
// limit bounds each link (nvJitLink call), not their sum.
Expected<LinkOutput> link_all(const UdfLinkConfig& cfg, const std::vector<LinkArtifact>& arts, const KernelPack& pack,
                              const LinkPlan& plan, const LinkCommand& cmd, unsigned threads, detail::ToolCache& cache,
                              std::string& verbose_log) {
  LinkRunOptions run;
  run.threads = threads;
  run.lookup = [&](const std::string& k) { return cache.lookup(k, [](const Bytes&) { return true; }, verbose_log); };
  run.store = [&](const std::string& k, const Bytes& cubin) { cache.store(k, cubin); };
  std::string names;
  for (const auto& in : cfg.inputs) names += (names.empty() ? "" : ", ") + ("'" + in + "'");
  CompileWatchdog watchdog(cmd.limits, "linking " + names, cfg.on_compile_limit);
  run.on_link_done = [&] { watchdog.progress(); };
  return run_link(arts, pack, plan, cmd.emit, run);
}

// The verbose log of a link that ran: what was read, each link, the fatbin.
std::string link_report(const UdfLinkConfig& cfg, const std::vector<LinkArtifact>& arts, const KernelPack& pack,
                        const LinkPlan& plan, EmitKind emit, const LinkOutput& out, double read_ms, double pack_ms) {
  std::string v = fmt::format("udf-link: read {} artifact(s) in {:.1f} ms; kernel pack {} ({} variants, {} kernels) in {:.1f} ms\n",
                              arts.size(), read_ms, pack.name, pack.variants.size(), pack.kernels.size(), pack_ms);
  for (const auto& a : arts) {
    const auto& m = a.artifact.manifest;
    if (m.kind == UdfKind::Filter)
      v += fmt::format("udf-link:   {}: filter {} ({})\n", a.name, m.symbol, m.source_name);
    else
      v += fmt::format("udf-link:   {}: {} ({} {}/{} {}-ordered)\n", a.name, m.symbol, m.source_name, to_string(m.elem),
                       to_string(m.acc), to_string(m.order));
  }
  const auto& tm = out.timing;
  std::size_t hits = 0;
  for (const auto& jr : tm.jobs) hits += jr.cache_hit ? 1 : 0;
  v += fmt::format("udf-link: {} entries, k buckets up to {}; entry wrappers compiled in {:.1f} ms\n",
                   out.linked_entries.size(), plan.max_k, tm.wrappers_s * 1e3);
  for (const auto& jr : tm.jobs) {
    const std::string what = emit == EmitKind::Module ? plan.entries[jr.job.entries.front()].name
                                                      : fmt::format("{} entries", jr.job.entries.size());
    if (jr.cache_hit)
      v += fmt::format("udf-link: {}: {}: cache hit, cubin {} bytes\n", arch_name(jr.job.arch), what, jr.cubin_bytes);
    else
      v += fmt::format("udf-link: {}: {}: {} ({}) linked in {:.1f} ms, cubin {} bytes\n", arch_name(jr.job.arch), what,
                       nvjitlink_version_string(), fmt::join(plan.link_options, " "), jr.seconds * 1e3, jr.cubin_bytes);
  }
  v += fmt::format("udf-link: {} link(s) of {} ({} cached), {} at a time, in {:.1f} ms\n", tm.jobs.size() - hits, tm.jobs.size(),
                   hits, tm.threads, tm.links_s * 1e3);
  if (emit != EmitKind::Cubin) {
    std::size_t fb = 0;
    for (const auto& im : out.module.images) fb += im.size();
    v += fmt::format("udf-link: fatbin ({}) {} image(s), {} bytes in {:.1f} ms\n", out.module.manifest.packager,
                     out.module.images.size(), fb, tm.fatbin_s * 1e3);
  }
  if (!out.info_log.empty()) v += out.info_log;
  if (cfg.save_temps)
    for (const auto& [job, cubin] : out.cubins) v += fmt::format("udf-link: kept {}\n", temp_name(*cfg.output, plan, job, emit));
  return v;
}

}  // namespace

Expected<UdfLinkResult> run_udf_link(const UdfLinkConfig& cfg) {
  auto t0 = Clock::now();
  UdfLinkResult r;
  UDF_TRY(cmd, check_command_line(cfg));
  const EmitKind emit = cmd.emit;
  UDF_TRY(arts, read_inputs(cfg));
  double read_ms = ms_since(t0);

  auto tp = Clock::now();
  // The pack's LTO-IR files (checked by SHA-256) are read only for a link,
  // and only the ones its entries use: a cache hit needs the manifest alone.
  // The memo cache remembers the parsed manifest: a hit neither reads nor
  // parses nor hashes it (a dry run writes nothing, not even a cache
  // folder).  It remembers nvFatbin's version too (plan_link): a hit loads
  // no nvFatbin.
  Cache memo = cfg.no_cache || cfg.dry_run ? Cache::disabled() : Cache::memo(cfg.cache_dir);
  UDF_TRY(pack, load_kernel_pack(cfg.kernel_pack_dir.value_or(default_kernel_pack_dir()), false, &memo));
  double pack_ms = ms_since(tp);
  UDF_TRY(plan, plan_link(arts, pack, cmd.archs, LinkSelection{cfg.pairs, cfg.max_k.value_or(0), cfg.exact}, &memo));
  const unsigned threads = cfg.jobs ? static_cast<unsigned>(*cfg.jobs) : link_threads_default();
  if (cfg.dry_run) {
    r.out = render_plan(plan, arts, pack, cfg.output.value_or("-"), emit, threads);
    return r;
  }

  // Every file read: the artifacts and the kernel pack (its manifest and the
  // LTO-IR files the entries use).
  const std::vector<std::string> pack_files = plan_pack_files(plan);
  DependencyList deps;
  for (const auto& in : cfg.inputs) deps.add(in);
  deps.add(pack.dir + "/" + kKernelPackManifest);
  for (const auto& f : pack_files) deps.add(pack.dir + "/" + f);

  const std::string key = link_cache_key(arts, pack, plan, emit);
  // --save-temps needs the cubins, which only a real link makes.
  detail::ToolCache cache("udf-link", cfg.no_cache || cfg.save_temps, cfg.cache_dir, r.warnings);
  auto valid = [&](const Bytes& b) { return emit != EmitKind::Module || static_cast<bool>(parse_module(b, "cache entry " + key)); };
  if (auto hit = cache.lookup(key, valid, r.verbose_log)) {
    UDF_TRY_VOID(detail::write_outputs({{*cfg.output, std::move(*hit)}}, cfg.depfile, deps));
    r.verbose_log += fmt::format("udf-link: kernel pack {}: manifest {} in {:.1f} ms\n", pack.name,
                                 pack.remembered ? "read from the memo cache" : "parsed", pack_ms);
    r.verbose_log += fmt::format("udf-link: cache hit {} -> {} ({:.1f} ms)\n", key, *cfg.output, ms_since(t0));
    return r;
  }

  UDF_TRY_VOID(read_kernel_pack_files(pack, &pack_files));
  UDF_TRY(out, link_all(cfg, arts, pack, plan, cmd, threads, cache, r.verbose_log));
  Bytes bytes;
  if (emit == EmitKind::Module) bytes = serialize_module(out.module);
  else if (emit == EmitKind::Fatbin) bytes = out.module.images.front();
  else bytes = out.cubins.front().second;
  std::vector<detail::Output> outputs = {{*cfg.output, bytes}};
  if (cfg.save_temps)
    for (const auto& [job, cubin] : out.cubins) outputs.push_back({temp_name(*cfg.output, plan, job, emit), cubin});
  UDF_TRY_VOID(detail::write_outputs(outputs, cfg.depfile, deps));
  cache.store(key, bytes);

  r.warnings.insert(r.warnings.end(), out.warnings.begin(), out.warnings.end());
  // The cache's warnings come once a link (a read-only cache: one a link): each once.
  std::set<std::string> seen;
  r.warnings.erase(std::remove_if(r.warnings.begin(), r.warnings.end(),
                                  [&](const Diagnostic& d) { return !seen.insert(d.message).second; }),
                   r.warnings.end());
  r.verbose_log += link_report(cfg, arts, pack, plan, emit, out, read_ms, pack_ms);
  r.verbose_log += fmt::format("udf-link: wrote {} ({} bytes) in {:.1f} ms total\n", *cfg.output, bytes.size(), ms_since(t0));
  return r;
}

std::string udf_link_version_report(const std::optional<std::string>& kernel_pack_dir) {
  std::vector<LibraryStatus> libs = {
      nvrtc_library_status(),
      nvjitlink_library_status(),
      nvfatbin_library_status(),
      nvvm_library_status(),
  };
  std::string dir = kernel_pack_dir.value_or(default_kernel_pack_dir());
  auto pack = load_kernel_pack(dir);
  libs.push_back(pack ? LibraryStatus{"kernel pack", true, dir, pack->name + " (" + pack->metric_abi_id + ")", {}, {}}
                      : LibraryStatus{"kernel pack", false, dir, {}, pack.error().message(), {}});
  return fmt::format("udf-link {}\n", kUdfVersion) + detail::library_report(libs);
}

}  // namespace udf
