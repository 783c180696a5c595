#include "udf/link/link.h"

#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "udf/artifact/embedded.h"
#include "udf/link/elf.h"
#include "udf/link/fatbin.h"
#include "udf/link/jitlink.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"

namespace udf {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The payload to use for `target`: the newest arch not newer than it.
const std::pair<const Arch, Bytes>* payload_for(const Artifact& a, Arch target) {
  const std::pair<const Arch, Bytes>* best = nullptr;
  for (const auto& p : a.ltoir)
    if (p.first <= target) best = &p;
  return best;
}

bool any_metric_v2(const std::vector<LinkArtifact>& arts) {
  return std::any_of(arts.begin(), arts.end(), [](const LinkArtifact& a) { return a.artifact.manifest.shape.has_value(); });
}

std::string archs_of(const Artifact& a) {
  std::string s;
  for (const auto& p : a.ltoir) s += (s.empty() ? "" : ", ") + arch_name(p.first);
  return s;
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

// The UDF functions an entry passes to its scan variant, after the args.
std::string udf_arguments(const ArtifactManifest& m) {
  if (m.shape == MetricShape::State) return fmt::format("&{}, &{}", m.symbol, m.finalize.value_or(""));
  if (m.shape == MetricShape::Vector) return "&" + m.symbol;
  return fmt::format("&{}, {}", m.symbol, m.finalize ? "&" + *m.finalize : std::string("0"));
}

// `pairs`: (metric input, filter input) of the filtered entries.
// `prune_ok`: every target arch is sm_90 or newer (PRUNE, below).
std::string entry_source(const std::vector<LinkArtifact>& arts, const KernelPack& pack,
                         const std::vector<std::pair<int, int>>& pairs, bool prune_ok, std::vector<ModuleEntry>& entries) {
  const ModuleSlots slots = module_slots(arts);
  std::string src = "#include <udf/kernels/ivf_flat_v1.h>\n\n";
  for (const auto& a : arts) src += fmt::format("// {}: {} {}\n", a.name, to_string(a.artifact.manifest.kind), a.artifact.manifest.symbol) +
                                    declare_udf(a.artifact.manifest);
  src += "\n";
  auto add = [&](int mi, std::optional<int> fi) {
    const auto& m = arts[mi].artifact.manifest;
    const std::string filter = fi ? "&" + arts[*fi].artifact.manifest.symbol : std::string("0");
    // PRUNE (ivf_flat_v1.h): a monotone metric's unfiltered entries take the
    // pack's prune variants (k_max 32) as well as the plain ones, under
    // their own names: the runtime picks per search (a single query's few
    // items, all running at once, have no bound to prune with: the plain
    // scan is 2-4 us faster there).  Only when every target is sm_90 or
    // newer: before sm_90 ptxas turns the prune scan's shuffles into calls
    // of its helpers (about 490 call sites in the weighted-L2 entry for
    // sm_80, 7 in the plain one), and the entries are compiled once for all
    // the targets.
    const bool prune = prune_ok && !fi && m.monotone;
    for (const auto& v : pack.variants) {
      if (v.elem != m.elem || v.acc != m.acc || v.order != m.order || v.shape != m.shape) continue;
      if (v.prunes() && !prune) continue;
      std::string name = fi ? filtered_entry_name(m.symbol, arts[*fi].artifact.manifest.symbol, v) : entry_name(m.symbol, v);
      int threads = static_cast<int>(v.launch.count("block_threads") ? v.launch.at("block_threads") : 128);
      // The pack's min_blocks_per_sm (the prune variants: the plain ones' occupancy).
      const auto mb = v.launch.find("min_blocks_per_sm");
      const std::string bounds = mb != v.launch.end() ? fmt::format("{}, {}", threads, mb->second) : fmt::format("{}", threads);
      src += fmt::format(
          "extern \"C\" __global__ void __launch_bounds__({}) {}(udf_ivf_scan_args_v1 args) {{\n"
          "  {}(&args, {}, {});\n}}\n",
          bounds, name, v.name, udf_arguments(m), filter);
      entries.push_back(ModuleEntry{name, slots.index[mi], fi ? std::optional<int>(slots.index[*fi]) : std::nullopt, v.name,
                                    v.launch});
      entries.back().launch["k_max"] = v.k_max;
    }
    src += "\n";
  };
  for (int mi : slots.metrics) add(mi, std::nullopt);
  for (const auto& [mi, fi] : pairs) add(mi, fi);
  // UDF-independent kernels (the merges) for the orderings the metrics use.
  for (const auto& k : pack.kernels) {
    bool used = !k.order || std::any_of(arts.begin(), arts.end(), [&](const LinkArtifact& a) {
      return a.artifact.manifest.kind == UdfKind::Metric && a.artifact.manifest.order == *k.order;
    });
    if (used) entries.push_back(ModuleEntry{k.name, std::nullopt, std::nullopt, k.name, k.launch});
  }
  return src;
}

Expected<Bytes> compile_entries(const std::string& src, const std::vector<std::string>& options) {
  nvrtcProgram p = nullptr;
  const char* headers[] = {embedded_abi_header(), embedded_filter_abi_header(), embedded_abi_v2_header(), embedded_kernel_header()};
  const char* names[] = {"udf/abi/metric_v1.h", "udf/abi/filter_v1.h", "udf/abi/metric_v2.h", "udf/kernels/ivf_flat_v1.h"};
  if (auto r = nvrtcCreateProgram(&p, src.c_str(), "udf_link_entries.cu", 4, headers, names); r != NVRTC_SUCCESS)
    return library_failure(fmt::format("nvrtcCreateProgram failed: {}", nvrtcGetErrorString(r)));
  struct Guard {
    nvrtcProgram& p;
    ~Guard() { nvrtcDestroyProgram(&p); }
  } guard{p};
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(argv.size()), argv.data());
  size_t n = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(p, &n) == NVRTC_SUCCESS && n > 1) {
    log.resize(n);
    nvrtcGetProgramLog(p, log.data());
  }
  if (r != NVRTC_SUCCESS)  // generated code: a failure here is our bug
    return internal_error(fmt::format("compiling the generated entry kernels failed: {}\n{}", nvrtcGetErrorString(r), log))
        .with_raw_log(src);
  if (auto rr = nvrtcGetLTOIRSize(p, &n); rr != NVRTC_SUCCESS || n == 0)
    return library_failure("NVRTC produced no LTO-IR for the entry kernels");
  Bytes out(n);
  if (auto rr = nvrtcGetLTOIR(p, reinterpret_cast<char*>(out.data())); rr != NVRTC_SUCCESS)
    return library_failure(fmt::format("nvrtcGetLTOIR failed: {}", nvrtcGetErrorString(rr)));
  return out;
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
// ABI v2 variants "udf_ivf_scan_v2_state" / "udf_ivf_scan_v2_vector".
static std::string entry_prefix(const PackVariant& v) {
  if (v.prunes()) return "udf_ivf_scan_v1_prune";
  return v.shape ? fmt::format("udf_ivf_scan_v2_{}", to_string(*v.shape)) : std::string("udf_ivf_scan_v1");
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
                             const std::vector<std::string>& pairs) {
  std::vector<Diagnostic> errs;
  auto fail = [&](std::string msg, std::vector<std::string> notes = {}, DiagCode code = DiagCode::IncompatibleArtifact) {
    errs.push_back(Diagnostic(code, std::move(msg), std::move(notes)));
  };
  if (arts.empty()) return usage_error("no input artifacts");
  if (archs.empty()) return usage_error("no target arch: pass --arch (for example --arch sm_90)");
  UDF_TRY(selected, select_pairs(arts, pairs));
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
        if (!payload_for(a.artifact, t))
          fail(fmt::format("{}: no LTO-IR for {} or an older arch (the artifact has {})", a.name, arch_name(t), archs_of(a.artifact)),
               {fmt::format("recompile it with udfc --arch {}", arch_name(t))});
      defined[m.symbol].push_back(a.name);
      continue;
    }
    const bool v2 = m.abi_id == kMetricV2AbiId;
    if (v2 && pack.metric_v2 && !pack.metric_v2_missing.empty())
      fail(fmt::format("{}: metric {} follows ABI {}; the kernel pack {}'s file of v2 scans, {}, is missing from {}", a.name,
                       m.symbol, m.abi_id, pack.name, pack.metric_v2_missing, pack.dir),
           {"copy the whole share/udf/kernels folder"}, DiagCode::KernelPack);
    else if (v2 && !pack.metric_v2)
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
      if (!payload_for(a.artifact, t))
        fail(fmt::format("{}: no LTO-IR for {} or an older arch (the artifact has {})", a.name, arch_name(t), archs_of(a.artifact)),
             {fmt::format("recompile it with udfc --arch {}", arch_name(t))});
    defined[m.symbol].push_back(a.name);
    if (m.finalize) defined[*m.finalize].push_back(a.name);
  }
  for (const auto& [sym, where] : defined) {
    if (where.size() < 2) continue;
    std::vector<std::string> notes;
    for (const auto& w : where) notes.push_back(">>> defined in " + w);
    fail("duplicate symbol: " + sym, notes, DiagCode::DuplicateSymbol);
  }
  const bool v2 = any_metric_v2(arts);
  for (Arch t : archs)
    if (!pack_file_for(pack, t) || (v2 && pack.metric_v2 && pack.metric_v2_missing.empty() && !pack_file_for(pack, t, true)))
      fail(fmt::format("the kernel pack {} has no LTO-IR for {} or an older arch", pack.name, arch_name(t)), {},
           DiagCode::KernelPack);
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));

  LinkPlan plan;
  Arch oldest = pack.files.front().arch;
  for (const auto& f : pack.files) oldest = std::min(oldest, f.arch);
  plan.wrapper_nvrtc_options = {fmt::format("-arch=compute_{}", oldest), "-dlto", "-rdc=true", "-std=c++17"};
  plan.pairs = std::move(selected);
  plan.entry_source = entry_source(arts, pack, plan.pairs, *std::min_element(archs.begin(), archs.end()) >= 90, plan.entries);
  std::set<std::string> names;
  for (const auto& e : plan.entries)
    if (!names.insert(e.name).second)  // metric a__where__b with filter c vs metric a with filter b__where__c...
      return diagnosed(DiagCode::DuplicateSymbol, fmt::format("two entry kernels would be named {}: rename a metric or filter "
                                                              "so that no symbol contains '__where__'", e.name));
  for (Arch t : archs) {
    LinkPlanArch pa;
    pa.arch = t;
    pa.options = {fmt::format("-arch=sm_{}", t), "-lto", "-O3"};
    // Only the entries go into the cubin: without this every kernel of the
    // pack is compiled (2-3x the link time and cubin size).
    for (const auto& e : plan.entries) pa.options.push_back("-kernels-used=" + e.name);
    pa.inputs.emplace_back(pack_file_for(pack, t)->name, pack_file_for(pack, t)->arch);
    if (v2) pa.inputs.emplace_back(pack_file_for(pack, t, true)->name, pack_file_for(pack, t, true)->arch);
    pa.inputs.emplace_back("<entry kernels>", oldest);
    for (const auto& a : arts) pa.inputs.emplace_back(a.name, payload_for(a.artifact, t)->first);
    plan.archs.push_back(std::move(pa));
  }
  auto fb = nvfatbin_info();
  plan.packager = fb.available ? fb.version : "fatbinary (nvFatbin not found)";
  return plan;
}

Expected<LinkOutput> run_link(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const LinkPlan& plan,
                              EmitKind emit) {
  LinkOutput out;
  auto t0 = Clock::now();
  UDF_TRY(entries_ir, compile_entries(plan.entry_source, plan.wrapper_nvrtc_options));
  out.timing.entries_compile_s = since(t0);

  std::vector<std::string> udf_symbols;
  // Symbols of v2 metrics packaged from LTO-IR: udfc took their shape from
  // --shape without seeing the signature, so a call left in place is most
  // likely a shape that does not match it (the inliner refuses a call whose
  // signature differs from the definition's).
  std::set<std::string> ltoir_v2_symbols;
  for (const auto& a : arts) {
    const ArtifactManifest& am = a.artifact.manifest;
    udf_symbols.push_back(am.symbol);
    if (am.finalize) udf_symbols.push_back(*am.finalize);
    if (am.source_kind == SourceKind::LtoIr && am.shape) {
      ltoir_v2_symbols.insert(am.symbol);
      if (am.finalize) ltoir_v2_symbols.insert(*am.finalize);
    }
  }
  // One nvJitLink handle per arch, linked concurrently (handles are independent).
  std::vector<std::future<Expected<JitLinkOutput>>> jobs;
  for (const auto& pa : plan.archs) {
    std::vector<LinkInput> inputs;
    const auto* pf = pack_file_for(pack, pa.arch);
    inputs.push_back(LinkInput{pf->name, LinkInputKind::LtoIr, pf->ltoir});
    if (any_metric_v2(arts)) {  // the ABI v2 scans, only when a metric needs them
      const auto* pf2 = pack_file_for(pack, pa.arch, true);
      inputs.push_back(LinkInput{pf2->name, LinkInputKind::LtoIr, pf2->ltoir});
    }
    inputs.push_back(LinkInput{"<entry kernels>", LinkInputKind::LtoIr, entries_ir});
    for (const auto& a : arts) inputs.push_back(LinkInput{a.name, LinkInputKind::LtoIr, payload_for(a.artifact, pa.arch)->second});
    jobs.push_back(std::async(std::launch::async, [opts = pa.options, inputs = std::move(inputs)] { return jit_link(opts, inputs); }));
  }
  for (std::size_t ai = 0; ai < plan.archs.size(); ++ai) {
    const auto& pa = plan.archs[ai];
    auto linked = jobs[ai].get();
    if (!linked) {
      for (std::size_t rest = ai + 1; rest < jobs.size(); ++rest) jobs[rest].wait();
      return link_error(linked.error(), arts, pa.arch, plan.wrapper_nvrtc_options);
    }
    out.timing.link_s.emplace_back(pa.arch, linked->seconds);
    if (!linked->info_log.empty()) out.info_log += fmt::format("[{}] {}\n", arch_name(pa.arch), linked->info_log);

    // Trust nothing: every expected entry must be in the cubin's symbol table.
    UDF_TRY(elf, read_elf(linked->cubin, fmt::format("cubin for {}", arch_name(pa.arch))));
    std::set<std::string> funcs;
    for (const auto& s : elf.symbols)
      if (s.is_function()) funcs.insert(s.name);
    std::vector<Diagnostic> missing;
    for (const auto& e : plan.entries)
      if (!funcs.count(e.name))
        missing.push_back(Diagnostic(DiagCode::MissingEntry, fmt::format("entry kernel {} is missing from the {} cubin", e.name, arch_name(pa.arch))));
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
    for (const auto& s : udf_symbols)
      if (kept(s))
        out.warnings.push_back(Diagnostic(
            DiagCode::NotInlined,
            fmt::format("UDF function {} was not inlined into the {} scan kernels: it stays a call, which costs speed{}", s,
                        arch_name(pa.arch),
                        ltoir_v2_symbols.count(s) ? "; it was packaged from LTO-IR, whose signature udfc cannot read: check that "
                                                    "its --shape matches the function (a mismatched call gives wrong distances)"
                                                  : "")));
    out.cubins.emplace_back(pa.arch, std::move(linked->cubin));
  }

  ModuleManifest& m = out.module.manifest;
  m.abi_id = pack.metric_abi_id;
  m.abi_version = pack.metric_abi_version;
  m.kernel_pack_name = pack.name;
  m.kernel_pack_sha256 = pack.manifest_sha256;
  for (const auto& pa : plan.archs) m.archs.push_back(pa.arch);
  for (const auto& a : arts) {
    if (a.artifact.manifest.kind == UdfKind::Filter) m.filters.push_back(module_filter_from(a.artifact.manifest));
    else m.artifacts.push_back(module_artifact_from(a.artifact.manifest));
  }
  m.entries = plan.entries;
  m.udf_link_version = kUdfVersion;
  m.linker = nvjitlink_version_string();
  m.link_options = {"-lto", "-O3"};
  std::vector<Arch> archs;
  for (const auto& pa : plan.archs) archs.push_back(pa.arch);
  m.cache_key = link_cache_key(arts, pack, archs, emit);

  if (emit != EmitKind::Cubin) {
    auto t1 = Clock::now();
    std::vector<FatbinImage> images;
    for (const auto& [arch, cubin] : out.cubins)
      images.push_back(FatbinImage{arch, fmt::format("udf_module.{}", arch_name(arch)), cubin});
    UDF_TRY(fb, make_fatbin(images));
    out.timing.fatbin_s = since(t1);
    for (auto& w : fb.warnings) out.warnings.push_back(Diagnostic(DiagCode::Fatbin, w));
    m.packager = fb.tool.substr(0, fb.tool.find(" ("));
    out.module.fatbin = std::move(fb.fatbin);
  }
  return out;
}

std::string link_cache_key(const std::vector<LinkArtifact>& arts, const KernelPack& pack, const std::vector<Arch>& archs,
                           EmitKind emit, const std::vector<std::string>& pairs) {
  Sha256Builder k;
  // The tag changes whenever the same inputs link to a different module
  // (v3: a monotone metric's k 32 scan in two entries, pruning and plain),
  // so that no cache hands out what an older udf-link made.  The library's
  // file identity, not its version: asking the version loads 100 MB of
  // library, which would be most of a cache hit's time.
  k.part("udf.link.v3").part(kUdfVersion).part(nvjitlink_identity());
  auto fb = nvfatbin_info();
  k.part(fb.available ? fb.version : "fatbinary");
  k.part(pack.manifest_sha256);
  for (const auto& a : arts) k.part(a.file_sha256);
  for (Arch a : archs) k.part(arch_name(a));
  k.part(emit == EmitKind::Module ? "module" : emit == EmitKind::Fatbin ? "fatbin" : "cubin");
  if (!pairs.empty()) {  // keys of links without --pair stay as they were
    // Order and repeats do not change the module: neither changes the key.
    std::set<std::string> sorted(pairs.begin(), pairs.end());
    k.part("pairs");
    for (const auto& p : sorted) k.part(p);
  }
  return k.finish_hex();
}

}  // namespace udf
