// The link pipeline behind udf-link and udf_module_link: artifacts + kernel
// pack -> a plan of entries -> one nvJitLink (-lto) link per entry and arch
// (a module) or per arch (a bare fatbin or cubin), run in parallel and cached
// one by one -> checked cubins -> nvFatbin -> module.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/artifact.h"
#include "udf/artifact/module.h"
#include "udf/link/kernel_pack.h"

namespace udf {

struct LinkArtifact {
  std::string name;  // the path as given, for diagnostics
  Artifact artifact;
  std::string file_sha256;
};

enum class EmitKind { Module, Fatbin, Cubin };

/// How one planned entry is linked (parallel to LinkPlan::entries).
struct PlannedEntry {
  int metric = -1;          // input index of the scan's metric; -1 for a pack kernel (a merge)
  int filter = -1;          // input index of its filter; -1: unfiltered
  // The kernel pack files that hold its variant or kernel, with their archs,
  // oldest first (PackVariant::arch_files).
  std::vector<std::pair<Arch, std::string>> pack_files;
  std::string wrapper;      // the entry's __global__ wrapper (CUDA C++); empty for a pack kernel

  /// The file a link for `target` takes: the newest not newer than it (the
  /// oldest when none is; plan_link refuses such a target).
  const std::string& pack_file(Arch target) const;
};

/// The suffix of a direct twin's entry name (LinkSelection::direct).
inline constexpr const char* kDirectEntrySuffix = "__direct";

struct LinkPlan {
  std::vector<Arch> archs;                 // sorted
  std::vector<ModuleEntry> entries;        // every entry of the module, in module order
  std::vector<PlannedEntry> planned;       // parallel to entries
  std::vector<std::pair<int, int>> pairs;  // (metric input, filter input) given filtered entries
  int max_k = 0;                           // the largest k bucket linked (the pack's largest when every one is)
  bool rows = false;                       // the rows entries too: exact search and refine (LinkSelection::rows)
  bool direct = false;                     // each plain scan's direct twin too (LinkSelection::direct)
  std::vector<std::string> wrapper_nvrtc_options;
  Arch wrapper_arch = 75;                  // the arch of the wrappers' LTO-IR (the pack's oldest)
  std::vector<std::string> link_options;   // nvJitLink options besides -arch and -kernels-used
  std::string packager;                    // "nvfatbin 13.0" / fatbinary / none
  std::string nvfatbin_version;            // "nvfatbin 13.0"; empty: no nvFatbin (fatbinary packs)
};

/// One nvJitLink run: `entries` (indices into LinkPlan::entries) for one arch.
struct LinkJob {
  std::vector<int> entries;
  Arch arch = 0;
};

/// The kernel pack files that `entries` (indices; every entry when empty)
/// link with for `arch` (for any of the plan's archs when 0), by name,
/// sorted: what a link reads of the pack.
std::vector<std::string> plan_pack_files(const LinkPlan& plan, const std::vector<int>& entries = {}, Arch arch = 0);

/// The jobs an emit kind takes: a module links each entry on its own (one
/// image per entry), so that entries are cached and reused one by one; a bare
/// fatbin or cubin holds every entry in one cubin per arch.  `only`: the
/// entries to link (indices; all when empty).
std::vector<LinkJob> link_jobs(const LinkPlan& plan, EmitKind emit, const std::vector<int>& only = {});

/// What the entries of a run cost, for -v and the benchmarks.
struct LinkJobReport {
  LinkJob job;
  bool cache_hit = false;
  double seconds = 0;      // nvJitLink's time (0 for a hit)
  std::size_t cubin_bytes = 0;
};

struct LinkTiming {
  double wrappers_s = 0;    // NVRTC: the entry wrappers of the links (one program)
  double links_s = 0;       // wall time of the parallel links
  unsigned threads = 0;     // links run at once
  double fatbin_s = 0;
  std::vector<LinkJobReport> jobs;
};

struct LinkOutput {
  Module module;                                // images: one per linked entry (module emit) or one (fatbin)
  std::vector<int> linked_entries;              // the plan's entries in module.images order (module emit)
  std::vector<std::pair<LinkJob, Bytes>> cubins;  // every job's cubin, in job order (--save-temps, --emit cubin)
  std::vector<Diagnostic> warnings;
  LinkTiming timing;
  std::string info_log;
};

/// What a run may reuse: a per-job cache (lookup before linking, store after)
/// and how many links run at once.
struct LinkRunOptions {
  unsigned threads = 0;  // 0: link_threads_default()
  std::function<std::optional<Bytes>(const std::string& key)> lookup;  // a cached cubin, or nothing
  std::function<void(const std::string& key, const Bytes& cubin)> store;
  std::function<void()> on_link_done;  // after each link, on the thread that ran it (a watchdog's progress)
};

/// Links run at once by default: $UDF_LINK_JOBS when it is a positive
/// integer, else the CPUs this process may run on.
unsigned link_threads_default();

/// What plan_link selects beyond the inputs.
struct LinkSelection {
  std::vector<std::string> pairs;  // "METRIC:FILTER"; none: every metric with every filter
  int max_k = 0;                   // searches up to this k: the buckets up to the smallest >= it; 0: all
  bool rows = false;               // also each metric's rows entries (exact search and refine; ivf_flat_v1.h, ROWS LAYOUT)
  // Also each plain scan's direct twin (named <entry>__direct, launch.direct_only):
  // the scan for a direct schedule only (one query an item), a shorter link.
  // The runtime's on-demand modules link them for a first search's tiny
  // batch; a module file never holds one (parse_module refuses it).
  bool direct = false;
};

/// Checks every artifact against the pack and the archs (ABI, element type,
/// variants, payload per arch, clashing symbols) and builds the plan.
/// Reports every problem found.  Inputs are metrics and filters; every
/// metric gets unfiltered entries, and filtered ones for each pair.  memo:
/// remembers nvFatbin's version (nvfatbin_version), or NULL.
Expected<LinkPlan> plan_link(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack,
                             const std::vector<Arch>& archs, const LinkSelection& select = {}, Cache* memo = nullptr);

/// Runs the plan's jobs for `emit` (of the entries in `only`, all when
/// empty), in parallel, each looked up in and stored to the cache of `opt`.
Expected<LinkOutput> run_link(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack, const LinkPlan& plan,
                              EmitKind emit, const LinkRunOptions& opt = {}, const std::vector<int>& only = {});

/// The module of a run's images: the manifest of the plan with only the
/// linked entries, each naming its image.
ModuleManifest module_manifest(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack, const LinkPlan& plan,
                               const std::vector<int>& linked_entries, EmitKind emit, const std::string& cache_key);

/// The key of a link's output: tool and library versions, pack, input
/// artifacts' bytes, and the plan's archs, pairs and k buckets, the emit kind.
std::string link_cache_key(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack, const LinkPlan& plan,
                           EmitKind emit);

/// The key of one job's cubin: what it links (the pack file, the wrappers'
/// source, the UDFs' LTO-IR) and how (arch, options, library identities).
std::string link_job_key(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack, const LinkPlan& plan,
                         const LinkJob& job);

/// The entry kernel name for one metric and one variant.
std::string entry_name(const std::string& symbol, const PackVariant& v);
/// The entry kernel name for one metric with one filter and one variant.
std::string filtered_entry_name(const std::string& metric, const std::string& filter, const PackVariant& v);

}  // namespace udf
