#include "udf/link/link.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "udf/artifact/embedded.h"
#include "udf/cudalibs/nvfatbin.h"
#include "udf/cudalibs/nvjitlink.h"
#include "udf/cudalibs/nvrtc.h"
#include "udf/kernels/ivf_flat_v1.h"
#include "udf/link/elf.h"
#include "udf/link/fatbin.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"

namespace udf {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The payload to use for `target`: the newest arch not newer than it.
const std::pair<const Arch, Bytes>* payload_for(const Artifact& a, Arch target) { return a.payload_linking_into(target); }

std::string archs_of(const Artifact& a) {
  std::string s;
  for (const auto& p : a.ltoir) s += (s.empty() ? "" : ", ") + arch_name(p.first);
  return s;
}

// An artifact without LTO-IR for `target` or an older arch, named: the fix
// is to compile it for `target`, or to link for its oldest arch or newer.
Diagnostic no_ltoir_for(const LinkArtifact& a, Arch target) {
  std::string fix = fmt::format("recompile it with udfc --arch {}", arch_name(target));
  if (!a.artifact.ltoir.empty()) fix += fmt::format(", or link for {} or newer", arch_name(a.artifact.ltoir.begin()->first));
  return Diagnostic(DiagCode::IncompatibleArtifact,
                    fmt::format("{}: no LTO-IR for {} or an older arch (the artifact has {})", a.name, arch_name(target),
                                archs_of(a.artifact)),
                    {fix});
}

// Where each input goes in the module: metrics to artifacts[], filters to filters[].
struct ModuleSlots {
  std::vector<int> index;  // per input: its index among the inputs of its kind
  std::vector<int> metrics, filters;  // inputs of each kind, in input order
};
ModuleSlots module_slots(const std::vector<LinkArtifact>& arts) {
  ModuleSlots s;
  for (std::size_t i = 0; i < arts.size(); ++i) {
    auto& list = arts[i].artifact.manifest.kind == UdfKind::Filter ? s.filters : s.metrics;
    s.index.push_back(static_cast<int>(list.size()));
    list.push_back(static_cast<int>(i));
  }
  return s;
}

std::string declare_udf(const ArtifactManifest& m) {
  if (m.kind == UdfKind::Filter)
    return fmt::format("extern \"C\" __device__ bool {}(uint32_t, int64_t, const udf_ctx_v1 *);\n", m.symbol);
  std::string acc(c_type(m.acc));
  if (m.shape == MetricShape::State)
    return fmt::format("extern \"C\" __device__ void {1}({0}, {0}, udf_state_v2 *, const udf_ctx_v2 *);\n"
                       "extern \"C\" __device__ float {2}(const udf_state_v2 *, const udf_ctx_v2 *);\n",
                       acc, m.symbol, m.finalize.value_or(""));
  if (m.shape == MetricShape::Vector)
    return fmt::format("extern \"C\" __device__ float {1}(const {0} *, const {0} *, uint32_t, const udf_ctx_v2 *);\n", acc, m.symbol);
  std::string src = fmt::format("extern \"C\" __device__ {0} {1}({0}, {0}, {0}, const udf_ctx_v1 *);\n", acc, m.symbol);
  if (m.finalize) src += fmt::format("extern \"C\" __device__ float {}({}, const udf_ctx_v1 *);\n", *m.finalize, acc);
  return src;
}

// Capture alignment: a scan entry tells the compiler that its metric's array
// captures start on 16-byte boundaries (`launch.capture_align`, which the
// runtime guarantees: docs/kernels.md), so that a UDF reading one
// coordinate's value at a time gets them four at a time once inlined (one
// 16-byte load for every four coordinates; docs/performance-log.md has the
// measurement).  Scalar captures share the union's bits: only arrays get the
// assumption, and only arrays of 4-byte values (f32, i32), four to a load:
// libNVVM refuses the four-value loads of f16 arrays that numba-cuda-mlir's
// IR turns into ("unsupported operation"), and u8 gains little.  The
// assumption goes on a copy of the arguments that the scan gets instead of
// them (scan_entry_body's, which every scan entry makes): made on the kernel
// parameter itself (assume or assume_aligned, with or without storing the
// pointer back), it does not reach the inlined UDF's loads.
static_assert(kModuleCaptureAlign == UDF_IVF_SCAN_V1_CAPTURE_ALIGN, "the module format's and the kernels' capture alignment");
// Whether a capture gets that assumption.
bool aligned_capture(const Capture& c) { return c.array && (c.type == CaptureType::F32 || c.type == CaptureType::I32); }
// The wrapper's lines that give the copy `a` that assumption (none without such captures).
std::string capture_alignment(const ArtifactManifest& m) {
  std::string s;
  for (std::size_t i = 0; i < m.captures.size(); ++i)
    if (aligned_capture(m.captures[i]))
      s += fmt::format("  a.captures[{0}].ptr = __builtin_assume_aligned(args.captures[{0}].ptr, {1});\n", i,
                       UDF_IVF_SCAN_V1_CAPTURE_ALIGN);
  return s;
}

// The UDF functions an entry passes to its scan variant, after the args.
std::string udf_arguments(const ArtifactManifest& m) {
  if (m.shape == MetricShape::State) return fmt::format("&{}, &{}", m.symbol, m.finalize.value_or(""));
  if (m.shape == MetricShape::Vector) return "&" + m.symbol;
  return fmt::format("&{}, {}", m.symbol, m.finalize ? "&" + *m.finalize : std::string("0"));
}

// A scan entry's body: the copy of its arguments (ENTRY FLAGS, ivf_flat_v1.h:
// its flags, constants the scan folds, with one query an item's
// queries_per_item where the flags say so; the captures' alignment), then
// the call of its variant.
std::string scan_entry_body(const ArtifactManifest& m, const std::string& variant, const std::string& filter,
                            std::uint32_t flags) {
  const char* one = (flags & UDF_IVF_SCAN_ONE_QUERY) != 0u ? "  a.queries_per_item = 1u;\n" : "";
  return fmt::format("  udf_ivf_scan_args_v1 a = args;\n  a.entry_flags = {}u;\n{}{}  {}(&a, {}, {});\n", flags, one,
                     capture_alignment(m), variant, udf_arguments(m), filter);
}

Expected<Bytes> compile_entries(const std::string& src, const std::vector<std::string>& options) {
  NvrtcProgram prog;
  const char* headers[] = {embedded_abi_header(), embedded_filter_abi_header(), embedded_abi_v2_header(), embedded_kernel_header()};
  const char* names[] = {"udf/abi/metric_v1.h", "udf/abi/filter_v1.h", "udf/abi/metric_v2.h", "udf/kernels/ivf_flat_v1.h"};
  if (auto r = nvrtcCreateProgram(&prog.p, src.c_str(), "udf_link_entries.cu", 4, headers, names); r != NVRTC_SUCCESS)
    return nvrtc_failure(r, "nvrtcCreateProgram");
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
  const std::string log = nvrtc_program_log(prog.p);  // read before deciding on r
  if (r != NVRTC_SUCCESS)  // generated code: a failure here is our bug
    return internal_error(fmt::format("compiling the generated entry kernels failed: {}\n{}", nvrtcGetErrorString(r), log))
        .with_raw_log(src);
  return nvrtc_ltoir(prog.p, "the entry kernels");
}

// The largest k bucket to link for searches up to k = `max_k` (0: every
// bucket): the smallest scan k_max at or above it.
Expected<int> bucket_cutoff(const KernelPack& pack, int max_k) {
  std::set<int> buckets;
  for (const auto& v : pack.variants) buckets.insert(v.k_max);
  if (buckets.empty()) return internal_error("the kernel pack has no scan variants");
  if (max_k <= 0) return *buckets.rbegin();
  auto it = buckets.lower_bound(max_k);
  if (it == buckets.end())
    return usage_error(DiagCode::InvalidOptionValue,
                       fmt::format("--max-k {}: the kernel pack {} scans k up to {} at most", max_k, pack.name, *buckets.rbegin()));
  return *it;
}

// The module's entries, in module order: each metric's unfiltered scans,
// then the filtered scans of each pair, then the UDF-independent kernels
// (merges) of the orders the metrics use; k buckets up to plan.max_k.  The
// scans include the rows twins (exact search and refine) when plan.rows,
// and each plain scan's direct twin after it when plan.direct.
// `prune_ok`: every target arch is sm_90 or newer (PRUNE, below).
void plan_entries(const std::vector<LinkArtifact>& arts, const KernelPack& pack, LinkPlan& plan, bool prune_ok) {
  const ModuleSlots slots = module_slots(arts);
  auto add = [&](int mi, std::optional<int> fi) {
    const auto& m = arts[mi].artifact.manifest;
    const std::string filter = fi ? "&" + arts[*fi].artifact.manifest.symbol : std::string("0");
    // Pruning (ivf_flat_v1.h): a monotone metric's entries take the pack's
    // prune variants (k_max 32) as well as the plain ones, under their own
    // names: the runtime picks per search (a single query's few items, all
    // running at once, have no bound to prune with: the plain scan is
    // faster there).  Filtered entries only where the variant prunes
    // filtered launches (pack 1.16).  Only when every target is sm_90 or
    // newer: before sm_90 ptxas turns the prune scan's shuffles into calls
    // of its helpers, many more than in the plain scan.
    const bool prune = prune_ok && m.monotone;
    for (const auto& v : pack.variants) {
      if (v.elem != m.elem || v.acc != m.acc || v.order != m.order || v.shape != m.shape || v.k_max > plan.max_k) continue;
      if (v.prunes() && (!prune || (fi && !v.prunes_filtered()))) continue;
      if (v.rows() && !plan.rows) continue;
      std::string name = fi ? filtered_entry_name(m.symbol, arts[*fi].artifact.manifest.symbol, v) : entry_name(m.symbol, v);
      int threads = static_cast<int>(v.launch.count("block_threads") ? v.launch.at("block_threads") : 128);
      // The pack's min_blocks_per_sm (the prune variants: the plain ones'
      // occupancy), or for a filtered entry its filtered_min_blocks_per_sm;
      // the entry lists the one it was linked with as its min_blocks_per_sm.
      std::map<std::string, std::int64_t> launch = v.launch;
      if (auto fmb = launch.find("filtered_min_blocks_per_sm"); fmb != launch.end()) {
        if (fi) launch["min_blocks_per_sm"] = fmb->second;
        launch.erase("filtered_min_blocks_per_sm");
      }
      launch.erase("filtered_prune");  // what the variant takes, not how the entry launches
      const auto mb = launch.find("min_blocks_per_sm");
      const std::string bounds = mb != launch.end() ? fmt::format("{}, {}", threads, mb->second) : fmt::format("{}", threads);
      PlannedEntry pe;
      pe.metric = mi;
      pe.filter = fi.value_or(-1);
      pe.pack_files.emplace_back(pack_file(pack, v.file)->arch, v.file);
      for (const auto& f : v.arch_files) pe.pack_files.emplace_back(pack_file(pack, f)->arch, f);
      std::sort(pe.pack_files.begin(), pe.pack_files.end());
      const bool align = std::any_of(m.captures.begin(), m.captures.end(), aligned_capture);
      auto wrapper = [&](const std::string& entry, std::uint32_t flags) {
        return fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(udf_ivf_scan_args_v1 args) {{\n{}}}\n", bounds,
                           entry, scan_entry_body(m, v.name, filter, flags));
      };
      pe.wrapper = wrapper(name, 0);
      plan.entries.push_back(ModuleEntry{name, slots.index[mi], fi ? std::optional<int>(slots.index[*fi]) : std::nullopt,
                                         v.name, std::move(launch)});
      plan.entries.back().launch["k_max"] = v.k_max;
      if (align) plan.entries.back().launch["capture_align"] = UDF_IVF_SCAN_V1_CAPTURE_ALIGN;
      plan.planned.push_back(std::move(pe));
      // DIRECT TWIN (plan.direct; ivf_flat_v1.h): the same variant given
      // UDF_IVF_SCAN_ONE_QUERY, which LTO folds into the scan: a direct
      // schedule's code only, a shorter link.
      if (plan.direct && !v.prunes() && !v.rows()) {
        ModuleEntry twin = plan.entries.back();
        twin.name += kDirectEntrySuffix;
        twin.launch["direct_only"] = 1;
        PlannedEntry tp = plan.planned.back();
        tp.wrapper = wrapper(twin.name, UDF_IVF_SCAN_ONE_QUERY);
        plan.entries.push_back(std::move(twin));
        plan.planned.push_back(std::move(tp));
      }
    }
  };
  for (int mi : slots.metrics) add(mi, std::nullopt);
  for (const auto& [mi, fi] : plan.pairs) add(mi, fi);
  for (const auto& k : pack.kernels) {
    auto kmax = k.launch.find("k_max");
    if (kmax != k.launch.end() && kmax->second > plan.max_k) continue;
    bool used = !k.order || std::any_of(arts.begin(), arts.end(), [&](const LinkArtifact& a) {
      return a.artifact.manifest.kind == UdfKind::Metric && a.artifact.manifest.order == *k.order;
    });
    if (!used) continue;
    plan.entries.push_back(ModuleEntry{k.name, std::nullopt, std::nullopt, k.name, k.launch});
    PlannedEntry pe;
    pe.pack_files.emplace_back(pack_file(pack, k.file)->arch, k.file);
    plan.planned.push_back(std::move(pe));
  }
}

// The inputs (artifact indices, in input order) a job links besides the pack.
std::vector<int> job_artifacts(const LinkPlan& plan, const LinkJob& job) {
  std::set<int> used;
  for (int e : job.entries) {
    const PlannedEntry& pe = plan.planned[e];
    if (pe.metric >= 0) used.insert(pe.metric);
    if (pe.filter >= 0) used.insert(pe.filter);
  }
  return {used.begin(), used.end()};
}

// The CUDA source of a job's entry wrappers (empty when it links only pack
// kernels): the pack's header, the UDFs' declarations, the wrappers.
std::string job_source(const std::vector<LinkArtifact>& arts, const LinkPlan& plan, const LinkJob& job) {
  std::string wrappers;
  for (int e : job.entries) wrappers += plan.planned[e].wrapper;
  if (wrappers.empty()) return {};
  std::string src = "#include <udf/kernels/ivf_flat_v1.h>\n\n";
  for (int i : job_artifacts(plan, job)) {
    const auto& m = arts[i].artifact.manifest;
    src += fmt::format("// {} {}\n", to_string(m.kind), m.symbol) + declare_udf(m);
  }
  return src + "\n" + wrappers;
}

// A kernel that calls the artifact's functions, so that linking it with the
// artifact alone keeps them (LTO drops unreferenced device functions) and the
// PTX shows what they leave unresolved.
std::string probe_source(const ArtifactManifest& m) {
  std::string src = "#include <udf/abi/filter_v1.h>\n" + declare_udf(m);
  if (m.kind == UdfKind::Filter)
    return src + fmt::format("extern \"C\" __global__ void udf_link_probe(bool *out, const long long *id, const udf_ctx_v1 *ctx) {{\n"
                             "  out[0] = {}((uint32_t)id[1], id[0], ctx);\n}}\n", m.symbol);
  std::string acc(c_type(m.acc));
  if (m.shape == MetricShape::State)
    return "#include <udf/abi/metric_v2.h>\n" + src +
           fmt::format("extern \"C\" __global__ void udf_link_probe({} *io, float *f, udf_state_v2 *s, const udf_ctx_v2 *ctx) {{\n"
                       "  {}(io[0], io[1], s, ctx);\n  f[0] = {}(s, ctx);\n}}\n", acc, m.symbol, m.finalize.value_or(""));
  if (m.shape == MetricShape::Vector)
    return "#include <udf/abi/metric_v2.h>\n" + src +
           fmt::format("extern \"C\" __global__ void udf_link_probe(const {} *io, float *f, const udf_ctx_v2 *ctx) {{\n"
                       "  f[0] = {}(io, io + 1, 1u, ctx);\n}}\n", acc, m.symbol);
  src += fmt::format("extern \"C\" __global__ void udf_link_probe({} *io, float *f, const udf_ctx_v1 *ctx) {{\n", acc);
  src += fmt::format("  io[0] = {}(io[1], io[2], io[3], ctx);\n", m.symbol);
  if (m.finalize) src += fmt::format("  f[0] = {}(io[0], ctx);\n", *m.finalize);
  return src + "}\n";
}

// After a failed link: every unresolved function (ptxas names only the first)
// and which artifacts reference it, lld-style.
std::vector<Diagnostic> explain_unresolved(const std::vector<LinkArtifact>& arts, Arch arch,
                                           const std::vector<std::string>& nvrtc_options) {
  std::vector<Diagnostic> out;
  std::map<std::string, std::vector<std::string>> refs;
  std::vector<std::string> order;
  for (const auto& a : arts) {
    const auto* p = payload_for(a.artifact, arch);
    if (!p) continue;
    auto probe = compile_entries(probe_source(a.artifact.manifest), nvrtc_options);
    if (!probe) continue;
    auto r = jit_link({fmt::format("-arch=sm_{}", arch), "-lto"},
                      {LinkInput{"<probe>", LinkInputKind::LtoIr, *probe}, LinkInput{a.name, LinkInputKind::LtoIr, p->second}},
                      true);
    if (!r) continue;
    for (const auto& f : ptx_extern_functions(r->ptx)) {
      if (!refs.count(f)) order.push_back(f);
      refs[f].push_back(fmt::format(">>> referenced by {} ({} {})", a.name, to_string(a.artifact.manifest.kind), a.artifact.manifest.symbol));
    }
  }
  for (const auto& f : order) out.push_back(Diagnostic(DiagCode::UndefinedSymbol, "undefined symbol: " + f, refs[f]));
  return out;
}

// Which artifacts before `culprit` (the input nvJitLink named) also define
// `sym`: link each with it alone; the IR link fails at once on a clash.
std::vector<std::string> other_definers(const std::vector<LinkArtifact>& arts, const std::string& culprit,
                                        const std::string& sym, Arch arch) {
  std::vector<std::string> out;
  const LinkArtifact* c = nullptr;
  for (const auto& a : arts)
    if (a.name == culprit) c = &a;
  if (!c || !payload_for(c->artifact, arch)) return out;
  const std::string needle = fmt::format("Linking globals named '{}'", sym);
  for (const auto& a : arts) {
    if (&a == c) break;
    const auto* p = payload_for(a.artifact, arch);
    if (!p) continue;
    auto r = jit_link({fmt::format("-arch=sm_{}", arch), "-lto"},
                      {LinkInput{a.name, LinkInputKind::LtoIr, p->second},
                       LinkInput{c->name, LinkInputKind::LtoIr, payload_for(c->artifact, arch)->second}},
                      true);
    if (!r && r.error().raw_log().find(needle) != std::string::npos) out.push_back(a.name);
  }
  return out;
}

Error link_error(const Error& e, const std::vector<LinkArtifact>& arts, Arch arch,
                 const std::vector<std::string>& nvrtc_options) {
  const std::string log = e.raw_log();
  static const std::regex unresolved(R"(Unresolved extern function '([^']+)')");
  static const std::regex duplicate(R"((\S+): link error: error: Linking globals named '([^']+)': symbol multiply defined)");
  std::smatch m;
  if (std::regex_search(log, m, unresolved)) {
    auto diags = explain_unresolved(arts, arch, nvrtc_options);
    if (diags.empty()) diags.push_back(Diagnostic(DiagCode::UndefinedSymbol, "undefined symbol: " + std::string(m[1])));
    for (auto& d : diags) d.message += fmt::format(" (linking {})", arch_name(arch));
    return Error(ErrorKind::Diagnosed, std::move(diags)).with_raw_log(log);
  }
  if (std::regex_search(log, m, duplicate)) {
    Diagnostic d(DiagCode::DuplicateSymbol, fmt::format("duplicate symbol: {} (linking {})", std::string(m[2]), arch_name(arch)));
    auto others = other_definers(arts, m[1], m[2], arch);
    for (const auto& o : others) d.notes.push_back(fmt::format(">>> defined in {}", o));
    d.notes.push_back(fmt::format(">>> defined in {}", std::string(m[1])));
    if (others.empty()) d.notes.push_back(">>> and in an input linked before it (the kernel pack or the entry kernels)");
    return Error(ErrorKind::Diagnosed, d).with_raw_log(log);
  }
  Error out = e;
  return out.context(arch_name(arch));
}

}  // namespace

// "udf_ivf_scan_v1", "udf_ivf_scan_v1_prune" for the prune variants, or for
// ABI v2 variants "udf_ivf_scan_v2_state" / "udf_ivf_scan_v2_vector"; the
// rows twins' "udf_ivf_rows_v1" / "udf_ivf_rows_v2_<shape>".
static std::string entry_prefix(const PackVariant& v) {
  if (v.prunes()) return "udf_ivf_scan_v1_prune";
  const char* family = v.rows() ? "rows" : "scan";
  return v.shape ? fmt::format("udf_ivf_{}_v2_{}", family, to_string(*v.shape)) : fmt::format("udf_ivf_{}_v1", family);
}

std::string entry_name(const std::string& symbol, const PackVariant& v) {
  return fmt::format("{}__{}__{}_{}_{}_k{}", entry_prefix(v), symbol, to_string(v.elem), to_string(v.acc), to_string(v.order),
                     v.k_max);
}

std::string filtered_entry_name(const std::string& metric, const std::string& filter, const PackVariant& v) {
  return fmt::format("{}__{}__where__{}__{}_{}_{}_k{}", entry_prefix(v), metric, filter, to_string(v.elem), to_string(v.acc),
                     to_string(v.order), v.k_max);
}

Expected<std::vector<std::pair<int, int>>> select_pairs(const std::vector<LinkArtifact>& arts, const std::vector<std::string>& pairs) {
  std::vector<Diagnostic> errs;
  std::vector<std::pair<int, int>> out;
  auto find = [&](const std::string& sym) -> int {
    for (std::size_t i = 0; i < arts.size(); ++i)
      if (arts[i].artifact.manifest.symbol == sym) return static_cast<int>(i);
    return -1;
  };
  auto names_of = [&](UdfKind k) {
    std::string l;
    for (const auto& a : arts)
      if (a.artifact.manifest.kind == k) l += (l.empty() ? "" : ", ") + a.artifact.manifest.symbol;
    return l.empty() ? std::string("none") : l;
  };
  if (pairs.empty()) {  // every metric with every filter
    for (std::size_t m = 0; m < arts.size(); ++m)
      for (std::size_t f = 0; f < arts.size(); ++f)
        if (arts[m].artifact.manifest.kind == UdfKind::Metric && arts[f].artifact.manifest.kind == UdfKind::Filter)
          out.emplace_back(static_cast<int>(m), static_cast<int>(f));
    return out;
  }
  for (const auto& p : pairs) {
    const auto colon = p.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == p.size() || p.find(':', colon + 1) != std::string::npos) {
      errs.push_back(Diagnostic(DiagCode::InvalidOptionValue, fmt::format("--pair '{}': expected METRIC:FILTER", p)));
      continue;
    }
    const std::string ms = p.substr(0, colon), fs = p.substr(colon + 1);
    const int m = find(ms), f = find(fs);
    bool ok = true;
    auto check = [&](int i, const std::string& sym, UdfKind want) {
      if (i < 0) {
        errs.push_back(Diagnostic(DiagCode::InvalidOptionValue,
                                  fmt::format("--pair '{}': no input {} is named '{}' (input {}s: {})", p, to_string(want), sym,
                                              to_string(want), names_of(want))));
        ok = false;
      } else if (arts[i].artifact.manifest.kind != want) {
        errs.push_back(Diagnostic(DiagCode::InvalidOptionValue,
                                  fmt::format("--pair '{}': '{}' ({}) is a {}, not a {}", p, sym, arts[i].name,
                                              to_string(arts[i].artifact.manifest.kind), to_string(want))));
        ok = false;
      }
    };
    check(m, ms, UdfKind::Metric);
    check(f, fs, UdfKind::Filter);
    if (ok && std::find(out.begin(), out.end(), std::make_pair(m, f)) == out.end()) out.emplace_back(m, f);
  }
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  return out;
}

Expected<LinkPlan> plan_link(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const std::vector<Arch>& archs,
                             const LinkSelection& select, Cache* memo) {
  std::vector<Diagnostic> errs;
  auto fail = [&](std::string msg, std::vector<std::string> notes = {}, DiagCode code = DiagCode::IncompatibleArtifact) {
    errs.push_back(Diagnostic(code, std::move(msg), std::move(notes)));
  };
  if (arts.empty()) return usage_error("no input artifacts");
  if (archs.empty()) return usage_error("no target arch: pass --arch (for example --arch sm_90)");
  UDF_TRY(selected, select_pairs(arts, select.pairs));
  if (std::none_of(arts.begin(), arts.end(), [](const LinkArtifact& a) { return a.artifact.manifest.kind == UdfKind::Metric; })) {
    std::string names;
    for (const auto& a : arts) names += (names.empty() ? "" : ", ") + a.name;
    fail(fmt::format("no metric among the inputs (only filters: {}): a module needs at least one metric, which the "
                     "filters are applied to", names),
         {"add a metric artifact (udfc --kind metric, the default), e.g. share/udf/metrics/l2.udfa"});
  }
  std::map<std::string, std::vector<std::string>> defined;  // symbol -> artifacts defining it
  for (const auto& a : arts) {
    const auto& m = a.artifact.manifest;
    if (m.kind == UdfKind::Filter) {
      if (pack.filter_abi_id.empty())
        fail(fmt::format("{}: filter {}: the kernel pack {} takes no filters (it is older than ABI {})", a.name, m.symbol,
                         pack.name, m.abi_id));
      else if (m.abi_id != pack.filter_abi_id || m.abi_version != pack.filter_abi_version)
        fail(fmt::format("{}: filter ABI {} v{} does not fit the kernel pack {} (filter ABI {} v{})", a.name, m.abi_id,
                         m.abi_version, pack.name, pack.filter_abi_id, pack.filter_abi_version));
      for (Arch t : archs)
        if (!payload_for(a.artifact, t)) errs.push_back(no_ltoir_for(a, t));
      defined[m.symbol].push_back(a.name);
      continue;
    }
    const bool v2 = m.abi_id == kMetricV2AbiId;
    if (v2 && !pack.metric_v2)
      fail(fmt::format("{}: metric {} follows ABI {} v{}; the kernel pack {} is older and has only ABI {} v{} scans", a.name,
                       m.symbol, m.abi_id, m.abi_version, pack.name, pack.metric_abi_id, pack.metric_abi_version));
    else if (v2 ? (m.abi_version != kMetricV2AbiVersion || !m.shape)
                : (m.abi_id != pack.metric_abi_id || m.abi_version != pack.metric_abi_version))
      fail(fmt::format("{}: UDF ABI {} v{} does not fit the kernel pack {} (ABI {} v{}{})", a.name, m.abi_id, m.abi_version,
                       pack.name, pack.metric_abi_id, pack.metric_abi_version,
                       pack.metric_v2 ? fmt::format(" and {} v{}", kMetricV2AbiId, kMetricV2AbiVersion) : std::string()));
    bool has_variant = std::any_of(pack.variants.begin(), pack.variants.end(), [&](const PackVariant& v) {
      return v.elem == m.elem && v.acc == m.acc && v.order == m.order && v.shape == m.shape;
    });
    if (!has_variant && (!v2 || pack.metric_v2))
      fail(fmt::format("{}: the kernel pack {} has no {}scan kernel for {} elements with a {} accumulator, {}-ordered",
                       a.name, pack.name, m.shape ? fmt::format("ABI v2 {}-shaped ", to_string(*m.shape)) : std::string(),
                       to_string(m.elem), to_string(m.acc), to_string(m.order)));
    for (Arch t : archs)
      if (!payload_for(a.artifact, t)) errs.push_back(no_ltoir_for(a, t));
    defined[m.symbol].push_back(a.name);
    if (m.finalize) defined[*m.finalize].push_back(a.name);
  }
  for (const auto& [sym, where] : defined) {
    if (where.size() < 2) continue;
    std::vector<std::string> notes;
    for (const auto& w : where) notes.push_back(">>> defined in " + w);
    fail("duplicate symbol: " + sym, notes, DiagCode::DuplicateSymbol);
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));

  LinkPlan plan;
  plan.archs = archs;
  std::sort(plan.archs.begin(), plan.archs.end());
  plan.archs.erase(std::unique(plan.archs.begin(), plan.archs.end()), plan.archs.end());
  plan.wrapper_arch = pack.files.front().arch;
  for (const auto& f : pack.files) plan.wrapper_arch = std::min(plan.wrapper_arch, f.arch);
  plan.wrapper_nvrtc_options = {fmt::format("-arch=compute_{}", plan.wrapper_arch), "-dlto", "-rdc=true", "-std=c++17"};
  plan.link_options = {"-lto", "-O3"};
  plan.pairs = std::move(selected);
  UDF_TRY(max_k, bucket_cutoff(pack, select.max_k));
  plan.max_k = max_k;
  plan.rows = select.rows;
  plan.direct = select.direct;
  plan_entries(arts, pack, plan, plan.archs.front() >= 90);
  // Every pack file the entries use is in the folder, and each entry has
  // one that links into the oldest target: LTO-IR for an arch links into
  // that arch and every newer one.
  for (const auto& name : plan_pack_files(plan)) {
    if (pack_file(pack, name)->present) continue;
    std::size_t user = 0;  // the first entry that needs it
    while (std::none_of(plan.planned[user].pack_files.begin(), plan.planned[user].pack_files.end(),
                        [&](const auto& f) { return f.second == name; }))
      ++user;
    fail(fmt::format("the kernel pack {}'s file {} is missing from {} (entry {} needs it)", pack.name, name, pack.dir,
                     plan.entries[user].name),
         {"copy the whole share/udf/kernels folder"}, DiagCode::KernelPack);
  }
  std::set<Arch> too_new;  // the archs of the entries' oldest files that do not link into the oldest target
  for (const auto& pe : plan.planned)
    if (pe.pack_files.front().first > plan.archs.front()) too_new.insert(pe.pack_files.front().first);
  if (!too_new.empty()) {
    const Arch target = plan.archs.front(), newest = *too_new.rbegin();
    std::string built;
    for (Arch a : too_new) built += (built.empty() ? "" : ", ") + arch_name(a);
    fail(fmt::format("the kernel pack {} in {} has no LTO-IR for {} or an older arch: it is built for {}, which links "
                     "into {} and newer",
                     pack.name, pack.dir, arch_name(target), built, arch_name(newest)),
         {fmt::format("link for {} or newer, or rebuild the kernel pack for {} (cmake -DUDF_KERNEL_PACK_ARCH=compute_{})",
                      arch_name(newest), arch_name(target), target)},
         DiagCode::KernelPack);
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  std::set<std::string> names;
  for (const auto& e : plan.entries)
    if (!names.insert(e.name).second)  // metric a__where__b with filter c vs metric a with filter b__where__c...
      return diagnosed(DiagCode::DuplicateSymbol, fmt::format("two entry kernels would be named {}: rename a metric or filter "
                                                              "so that no symbol contains '__where__'", e.name));
  if (plan.entries.size() >= kMaxSections)
    return diagnosed(DiagCode::IncompatibleArtifact,
                     fmt::format("the module would hold {} entries, more than a module's {} images: link fewer metrics, "
                                 "filters or pairs into one module, or pass --max-k",
                                 plan.entries.size(), kMaxSections - 1));
  plan.nvfatbin_version = nvfatbin_version(memo);  // remembered: a cache hit loads no nvFatbin
  plan.packager = plan.nvfatbin_version.empty() ? "fatbinary (nvFatbin not found)" : plan.nvfatbin_version;
  return plan;
}

const std::string& PlannedEntry::pack_file(Arch target) const {
  for (auto f = pack_files.rbegin(); f != pack_files.rend(); ++f)
    if (f->first <= target) return f->second;
  return pack_files.front().second;
}

std::vector<std::string> plan_pack_files(const LinkPlan& plan, const std::vector<int>& entries, Arch arch) {
  std::set<std::string> files;
  auto add = [&](const PlannedEntry& pe) {
    if (arch) files.insert(pe.pack_file(arch));
    else
      for (Arch a : plan.archs) files.insert(pe.pack_file(a));
  };
  if (entries.empty())
    for (const auto& pe : plan.planned) add(pe);
  for (int e : entries) add(plan.planned[e]);
  return {files.begin(), files.end()};
}

std::vector<LinkJob> link_jobs(const LinkPlan& plan, EmitKind emit, const std::vector<int>& only) {
  std::vector<int> entries = only;
  if (entries.empty())
    for (std::size_t i = 0; i < plan.entries.size(); ++i) entries.push_back(static_cast<int>(i));
  std::vector<LinkJob> jobs;
  if (emit == EmitKind::Module) {
    for (int e : entries)
      for (Arch a : plan.archs) jobs.push_back(LinkJob{{e}, a});
  } else {
    for (Arch a : plan.archs) jobs.push_back(LinkJob{entries, a});
  }
  return jobs;
}

unsigned link_threads_default() {
  if (const char* e = std::getenv("UDF_LINK_JOBS"); e && *e) {
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (end && *end == '\0' && n > 0) return static_cast<unsigned>(std::min(n, 256L));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string link_job_key(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const LinkPlan& plan,
                         const LinkJob& job) {
  Sha256Builder k;
  // The tag changes whenever the same inputs link to a different cubin.
  k.part("udf.link.job.v1").part(kUdfVersion).part(nvjitlink_identity()).part(arch_name(job.arch));
  for (const auto& o : plan.link_options) k.part(o);
  for (int e : job.entries) k.part("-kernels-used=" + plan.entries[e].name);
  k.part(pack.manifest_sha256);  // pins every pack file
  for (const auto& f : plan_pack_files(plan, job.entries, job.arch)) k.part(f);
  const std::string src = job_source(arts, plan, job);
  if (!src.empty()) {
    k.part(nvrtc_identity()).part(src);
    for (const auto& o : plan.wrapper_nvrtc_options) k.part(o);
  }
  for (int i : job_artifacts(plan, job)) k.part(sha256_hex(payload_for(arts[i].artifact, job.arch)->second));
  return k.finish_hex();
}

namespace {

// Runs fn(i) for i in `order`, `threads` at a time.
void run_parallel(const std::vector<std::size_t>& order, unsigned threads, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < order.size();) fn(order[i]);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

// Checks a job's cubin: every entry must be a function in its symbol table
// (nvJitLink can report success and leave one out); a UDF function still
// there stayed a call (a warning, once per function and arch).
Expected<void> check_cubin(const std::vector<LinkArtifact>& arts, const LinkPlan& plan, const LinkJob& job,
                           const Bytes& cubin, std::vector<Diagnostic>& warnings, std::set<std::string>& warned) {
  UDF_TRY(elf, read_elf(cubin, fmt::format("cubin for {}", arch_name(job.arch))));
  std::set<std::string> funcs;
  for (const auto& s : elf.symbols)
    if (s.is_function()) funcs.insert(s.name);
  std::vector<Diagnostic> missing;
  for (int e : job.entries)
    if (!funcs.count(plan.entries[e].name))
      missing.push_back(Diagnostic(DiagCode::MissingEntry,
                                   fmt::format("entry kernel {} is missing from the {} cubin", plan.entries[e].name, arch_name(job.arch))));
  if (!missing.empty()) return Error(ErrorKind::Internal, std::move(missing));
  // A UDF that stays a call appears as its own function, or -- when the
  // compiler cloned it per kernel (a recursive one, say) -- as
  // "$<entry>$<symbol>".
  auto kept = [&](const std::string& s) {
    if (funcs.count(s)) return true;
    const std::string suffix = "$" + s;
    return std::any_of(funcs.begin(), funcs.end(), [&](const std::string& f) {
      return f.size() > suffix.size() && f[0] == '$' && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
  };
  for (int i : job_artifacts(plan, job)) {
    const ArtifactManifest& am = arts[i].artifact.manifest;
    // Symbols of v2 metrics packaged from LTO-IR: udfc took their shape from
    // --shape without seeing the signature, so a call left in place is most
    // likely a shape that does not match it (the inliner refuses a call whose
    // signature differs from the definition's).
    const bool ltoir_v2 = am.source_kind == SourceKind::LtoIr && am.shape;
    std::vector<std::string> syms{am.symbol};
    if (am.finalize) syms.push_back(*am.finalize);
    for (const auto& s : syms)
      if (kept(s) && warned.insert(s + " " + arch_name(job.arch)).second)
        warnings.push_back(Diagnostic(
            DiagCode::NotInlined,
            fmt::format("UDF function {} was not inlined into the {} scan kernels: it stays a call, which costs speed{}", s,
                        arch_name(job.arch),
                        ltoir_v2 ? "; it was packaged from LTO-IR, whose signature udfc cannot read: check that "
                                   "its --shape matches the function (a mismatched call gives wrong distances)"
                                 : "")));
  }
  return {};
}

// The error of a failed run: every failed job's, explained as one link of
// their artifacts per arch (every unresolved symbol with every artifact that
// references it, lld-style), each diagnostic once.
Error run_error(const std::vector<LinkArtifact>& arts, const LinkPlan& plan, const std::vector<LinkJob>& jobs,
                const std::vector<std::optional<Error>>& errors) {
  std::vector<Diagnostic> out;
  std::set<std::string> seen;
  std::string raw;
  ErrorKind kind = ErrorKind::Diagnosed;
  std::set<Arch> explained;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!errors[j]) continue;
    const Error& e = *errors[j];
    if (raw.empty()) raw = e.raw_log();
    if (e.kind() != ErrorKind::Diagnosed) kind = e.kind();
    Error described = e;
    if (e.raw_log().find("Unresolved extern function") != std::string::npos) {
      if (!explained.insert(jobs[j].arch).second) continue;  // one explanation an arch covers every job
      std::vector<LinkArtifact> failed;
      std::set<int> used;
      for (std::size_t o = 0; o < jobs.size(); ++o)
        if (errors[o] && jobs[o].arch == jobs[j].arch && errors[o]->raw_log().find("Unresolved extern function") != std::string::npos)
          for (int i : job_artifacts(plan, jobs[o])) used.insert(i);
      for (int i : used) failed.push_back(arts[i]);
      described = link_error(e, failed, jobs[j].arch, plan.wrapper_nvrtc_options);
    } else {
      std::vector<LinkArtifact> mine;
      for (int i : job_artifacts(plan, jobs[j])) mine.push_back(arts[i]);
      described = link_error(e, mine, jobs[j].arch, plan.wrapper_nvrtc_options);
    }
    for (const auto& d : described.diagnostics()) {
      std::string id = d.message;
      for (const auto& n : d.notes) id += "\n" + n;
      if (seen.insert(id).second) out.push_back(d);
    }
  }
  return Error(kind, std::move(out)).with_raw_log(raw);
}

// One run's jobs and what the stages below give them.
struct LinkRun {
  const std::vector<LinkArtifact>& arts;
  const KernelPack& pack;
  const LinkPlan& plan;
  std::vector<LinkJob> jobs;
  std::vector<std::string> keys;              // per job: its cache key (with a cache)
  std::vector<std::optional<Bytes>> cubins;   // per job: from the cache, then from its link
  std::vector<LinkJobReport> reports;
  std::vector<std::string> info;              // per job: nvJitLink's info log
  std::vector<std::size_t> missing;           // the jobs to link, costliest first
  std::set<int> wrapped;                      // the entries whose wrappers are in wrappers_ir
  Bytes wrappers_ir;
};

// Stage 1: every job's cubin from the cache, where it has one; the others
// are to be linked, the costliest first (scans before the UDF-independent
// kernels), so that the last links to start are short ones.
Expected<void> look_up_jobs(LinkRun& run, const LinkRunOptions& opt) {
  const std::size_t n = run.jobs.size();
  run.keys.resize(n);
  run.cubins.resize(n);
  run.reports.resize(n);
  run.info.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    run.reports[j].job = run.jobs[j];
    if (opt.lookup || opt.store) run.keys[j] = link_job_key(run.arts, run.pack, run.plan, run.jobs[j]);
    if (opt.lookup) run.cubins[j] = opt.lookup(run.keys[j]);
    if (run.cubins[j]) run.reports[j].cache_hit = true;
    else run.missing.push_back(j);
  }
  std::stable_sort(run.missing.begin(), run.missing.end(), [&](std::size_t a, std::size_t b) {
    return !job_source(run.arts, run.plan, run.jobs[a]).empty() > !job_source(run.arts, run.plan, run.jobs[b]).empty();
  });
  for (std::size_t j : run.missing)  // the pack's LTO-IR must have been read (load_kernel_pack, read_kernel_pack_files)
    for (const auto& name : plan_pack_files(run.plan, run.jobs[j].entries, run.jobs[j].arch))
      if (const auto* pf = pack_file(run.pack, name); !pf || !pf->read)
        return internal_error(fmt::format("the kernel pack's file {} was not read before the link", name));
  return {};
}

// Stage 2: every wrapper the links need, in one NVRTC program (one front-end
// run instead of one a wrapper); each link keeps its own entries
// (-kernels-used) and gives the same cubin as a program of its wrappers
// alone (the key covers only those).
Expected<void> compile_wrappers(LinkRun& run, LinkTiming& timing) {
  LinkJob all;
  all.arch = run.plan.archs.front();
  for (std::size_t j : run.missing)
    for (int e : run.jobs[j].entries)
      if (!run.plan.planned[e].wrapper.empty() && run.wrapped.insert(e).second) all.entries.push_back(e);
  std::sort(all.entries.begin(), all.entries.end());
  if (all.entries.empty()) return {};
  auto t = Clock::now();
  UDF_TRY(ir, compile_entries(job_source(run.arts, run.plan, all), run.plan.wrapper_nvrtc_options));
  run.wrappers_ir = std::move(ir);
  timing.wrappers_s = since(t);
  return {};
}

// One job's link: the pack files its entries use, the wrappers, the artifacts.
Expected<JitLinkOutput> link_job(const LinkRun& run, const LinkJob& job) {
  std::vector<LinkInput> inputs;
  for (const auto& name : plan_pack_files(run.plan, job.entries, job.arch)) {  // only the files its entries use
    const auto* pf = pack_file(run.pack, name);
    inputs.push_back(LinkInput{pf->name, LinkInputKind::LtoIr, pf->ltoir});
  }
  if (std::any_of(job.entries.begin(), job.entries.end(), [&](int e) { return run.wrapped.count(e); }))
    inputs.push_back(LinkInput{"<entry kernels>", LinkInputKind::LtoIr, run.wrappers_ir});
  for (int i : job_artifacts(run.plan, job))
    inputs.push_back(LinkInput{run.arts[i].name, LinkInputKind::LtoIr, payload_for(run.arts[i].artifact, job.arch)->second});
  std::vector<std::string> options{fmt::format("-arch=sm_{}", job.arch)};
  options.insert(options.end(), run.plan.link_options.begin(), run.plan.link_options.end());
  // Only the job's entries go into the cubin: without this every kernel
  // of the pack is compiled.
  for (int e : job.entries) options.push_back("-kernels-used=" + run.plan.entries[e].name);
  return jit_link(options, inputs);
}

// Stage 3: the missing jobs linked, `threads` at a time; every failure
// explained together (run_error).
Expected<void> link_missing(LinkRun& run, const LinkRunOptions& opt, LinkTiming& timing) {
  std::vector<std::optional<Error>> errors(run.jobs.size());
  const unsigned threads = std::max<unsigned>(
      1, std::min<unsigned>(opt.threads ? opt.threads : link_threads_default(),
                            static_cast<unsigned>(std::max<std::size_t>(1, run.missing.size()))));
  auto t0 = Clock::now();
  run_parallel(run.missing, threads, [&](std::size_t j) {
    auto linked = link_job(run, run.jobs[j]);
    if (opt.on_link_done) opt.on_link_done();
    if (!linked) {
      errors[j] = linked.error();
      return;
    }
    run.reports[j].seconds = linked->seconds;
    run.info[j] = std::move(linked->info_log);
    run.cubins[j] = std::move(linked->cubin);
  });
  timing.links_s = since(t0);
  timing.threads = run.missing.empty() ? 0 : threads;
  if (std::any_of(errors.begin(), errors.end(), [](const auto& e) { return e.has_value(); }))
    return run_error(run.arts, run.plan, run.jobs, errors);
  return {};
}

// Stage 4: trust nothing, a cached cubin included: every entry in its symbol
// table.  Then the new cubins go to the cache.
Expected<void> check_cubins(LinkRun& run, const LinkRunOptions& opt, LinkOutput& out, std::set<std::string>& warned) {
  for (std::size_t j = 0; j < run.jobs.size(); ++j) {
    UDF_TRY_VOID(check_cubin(run.arts, run.plan, run.jobs[j], *run.cubins[j], out.warnings, warned));
    run.reports[j].cubin_bytes = run.cubins[j]->size();
    if (!run.info[j].empty()) out.info_log += fmt::format("[{}] {}\n", arch_name(run.jobs[j].arch), run.info[j]);
  }
  if (opt.store)
    for (std::size_t j : run.missing) opt.store(run.keys[j], *run.cubins[j]);
  return {};
}

// Stage 5 (module and fatbin emits): the cubins packed, a module one image an
// entry (its cubin for every arch), a fatbin one image of every entry.
Expected<void> pack_images(const LinkRun& run, EmitKind emit, LinkOutput& out, std::set<std::string>& warned) {
  auto t1 = Clock::now();
  const std::size_t n = run.jobs.size();
  std::vector<std::vector<std::size_t>> groups;
  if (emit == EmitKind::Module) {
    std::map<int, std::size_t> group_of;
    for (std::size_t j = 0; j < n; ++j) {
      auto [it, fresh] = group_of.emplace(run.jobs[j].entries.front(), groups.size());
      if (fresh) {
        groups.emplace_back();
        out.linked_entries.push_back(run.jobs[j].entries.front());
      }
      groups[it->second].push_back(j);
    }
  } else {
    groups.emplace_back();
    for (std::size_t j = 0; j < n; ++j) groups.back().push_back(j);
  }
  for (const auto& g : groups) {
    std::vector<FatbinImage> images;
    for (std::size_t j : g) {
      const LinkJob& job = run.jobs[j];
      const std::string id = emit == EmitKind::Module ? run.plan.entries[job.entries.front()].name : std::string("udf_module");
      images.push_back(FatbinImage{job.arch, fmt::format("{}.{}", id, arch_name(job.arch)), *run.cubins[j]});
    }
    UDF_TRY(fb, make_fatbin(images));
    for (auto& w : fb.warnings)
      if (warned.insert(w).second) out.warnings.push_back(Diagnostic(DiagCode::Fatbin, w));
    out.module.images.push_back(std::move(fb.fatbin));
    out.module.manifest.packager = fb.tool.substr(0, fb.tool.find(" ("));
  }
  out.timing.fatbin_s = since(t1);
  return {};
}

}  // namespace

Expected<LinkOutput> run_link(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const LinkPlan& plan,
                              EmitKind emit, const LinkRunOptions& opt, const std::vector<int>& only) {
  LinkOutput out;
  LinkRun run{arts, pack, plan, link_jobs(plan, emit, only), {}, {}, {}, {}, {}, {}, {}};
  UDF_TRY_VOID(look_up_jobs(run, opt));
  UDF_TRY_VOID(compile_wrappers(run, out.timing));
  UDF_TRY_VOID(link_missing(run, opt, out.timing));
  std::set<std::string> warned;  // each warning once
  UDF_TRY_VOID(check_cubins(run, opt, out, warned));
  if (emit != EmitKind::Cubin) UDF_TRY_VOID(pack_images(run, emit, out, warned));
  if (emit != EmitKind::Module) out.linked_entries = run.jobs.front().entries;
  for (std::size_t j = 0; j < run.jobs.size(); ++j) out.cubins.emplace_back(run.jobs[j], std::move(*run.cubins[j]));
  out.timing.jobs = std::move(run.reports);
  const std::string packager = out.module.manifest.packager;
  out.module.manifest = module_manifest(arts, pack, plan, out.linked_entries, emit, link_cache_key(arts, pack, plan, emit));
  if (!packager.empty()) out.module.manifest.packager = packager;
  return out;
}

ModuleManifest module_manifest(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const LinkPlan& plan,
                               const std::vector<int>& linked_entries, EmitKind emit, const std::string& cache_key) {
  ModuleManifest m;
  m.abi_id = pack.metric_abi_id;
  m.abi_version = pack.metric_abi_version;
  m.kernel_pack_name = pack.name;
  m.kernel_pack_sha256 = pack.manifest_sha256;
  m.archs = plan.archs;
  for (const auto& a : arts) {
    if (a.artifact.manifest.kind == UdfKind::Filter) m.filters.push_back(module_filter_from(a.artifact.manifest));
    else m.artifacts.push_back(module_artifact_from(a.artifact.manifest));
  }
  for (std::size_t i = 0; i < linked_entries.size(); ++i) {
    m.entries.push_back(plan.entries[linked_entries[i]]);
    m.entries.back().image = emit == EmitKind::Module ? static_cast<int>(i) : 0;
  }
  m.udf_link_version = kUdfVersion;
  m.linker = nvjitlink_version_string();
  m.link_options = plan.link_options;
  m.packager = plan.packager.substr(0, plan.packager.find(" ("));
  m.cache_key = cache_key;
  return m;
}

std::string link_cache_key(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const LinkPlan& plan, EmitKind emit) {
  Sha256Builder k;
  // The tag changes whenever the same inputs link to a different module, so
  // that no cache hands out what an older udf-link made.  The library's file
  // identity, not its version: asking the version loads the whole library,
  // which would be most of a cache hit's time.
  k.part("udf.link.v5").part(kUdfVersion).part(nvjitlink_identity());
  k.part(plan.nvfatbin_version.empty() ? "fatbinary" : plan.nvfatbin_version);
  k.part(pack.manifest_sha256);
  for (const auto& a : arts) k.part(a.file_sha256);
  for (Arch a : plan.archs) k.part(arch_name(a));
  k.part(emit == EmitKind::Module ? "module" : emit == EmitKind::Fatbin ? "fatbin" : "cubin");
  // The pairs in plan order (the order of the filtered entries) and the
  // largest k bucket.
  k.part("pairs");
  for (const auto& [m, f] : plan.pairs) k.part(arts[m].artifact.manifest.symbol + ":" + arts[f].artifact.manifest.symbol);
  k.part("max_k").part(std::to_string(plan.max_k));
  if (plan.direct) k.part("direct");  // (the keys of plans without direct twins are those from before them)
  return k.finish_hex();
}

}  // namespace udf
