// The C++ side of udf_module_link and udf_module_link_ex (capi/link_api.cpp),
// testable without a GPU: artifacts -> a link session for one arch (parsed
// inputs, the kernel pack, the plan of every entry) -> linked entries through
// lib/link and the shared on-disk cache (the entries udf-link caches for that
// arch), either all at once (a serialized module) or bucket by bucket when a
// search first needs them (on demand).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "module/link_queue.h"
#include "udf/artifact/types.h"
#include "udf/link/link.h"
#include "udf/runtime.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf::rt {

struct ArtifactInput {
  std::string path;   // read from here when not empty
  Bytes bytes;        // else these bytes
  std::string name;   // for messages
};

struct LinkModuleOptions {
  std::optional<std::string> kernel_pack_dir;  // default: runtime_kernel_pack_dir()
  std::optional<std::string> cache_dir;        // default: Cache::open's ($UDF_CACHE_DIR, ...)
  bool no_cache = false;
  int max_k = 0;         // the largest k linked for (0: the pack's largest)
  bool rows = false;     // the plan has the rows entries too (exact search and refine)
  bool direct = false;   // the plan has each plain scan's direct twin too (LinkSelection::direct)
  unsigned threads = 0;  // links at once (0: link_threads_default())
};

/// Where a link failed, which decides the udf_status.
enum class LinkStage { Args, Read, Parse, KernelPack, Plan, Link };
udf_status link_stage_status(LinkStage stage);
std::string link_error_text(const Error& e);

/// $UDF_KERNEL_PACK_DIR, else <folder of libudf_runtime.so>/../share/udf/kernels
/// when it exists, else default_kernel_pack_dir() (next to the executable).
std::string runtime_kernel_pack_dir();

/// What every link of one module for one arch shares: the inputs, the pack
/// and the plan of every entry.
struct LinkSession {
  std::vector<LinkArtifact> arts;
  KernelPack pack;
  LinkPlan plan;
  LinkModuleOptions opt;
  std::string cache_key;  // the whole module's (udf-link's key for the same inputs, arch and selection;
                          // with opt.direct, a key of its own: udf-link plans no twins)
};

/// Reads and checks the inputs and plans the module for `arch`.
Expected<LinkSession> prepare_link(const std::vector<ArtifactInput>& inputs, Arch arch, const LinkModuleOptions& opt,
                                   LinkStage* stage = nullptr);

/// Links `entries` (indices into s.plan.entries; every one when empty), each
/// entry looked up in and stored to the cache; cache problems become
/// `warnings`.  Thread-safe for distinct calls (each opens its own cache).
Expected<LinkOutput> link_entries(const LinkSession& s, const std::vector<int>& entries, std::vector<std::string>& warnings);

struct LinkedModule {
  Bytes bytes;  // a .udfm
  std::string cache_key;
  bool cache_hit = false;
  std::vector<std::string> warnings;
};

/// Every entry at once, as a serialized module: udf-link's module for the
/// same inputs and arch, from the same cache entry.
Expected<LinkedModule> link_module_for_arch(const std::vector<ArtifactInput>& inputs, Arch arch,
                                            const LinkModuleOptions& opt, LinkStage* stage = nullptr);

/// The plan's entries a search of the module's metric `metric` (with its
/// filter `filter`, -1: none) for `k` runs: the scans (the rows twins when
/// `rows`: exact search and refine) of the smallest k bucket at or above k
/// that has a merge, and that merge; no direct twins (direct_twin).  Empty
/// when the plan has none.
std::vector<int> bucket_entries_for(const LinkSession& s, int metric, int filter, uint32_t k, bool rows = false);

/// Whether plan entry `e` is one a search can do without: a monotone
/// metric's pruning scan (launch.prune), whose bucket has the plain scan too.
/// A search of an on-demand module waits for the other entries of its bucket
/// only, and takes a pruning scan once its link is done (on_demand.cpp).
bool optional_entry(const LinkSession& s, int e);

/// Plan entry e's direct twin (LinkSelection::direct: the same scan for
/// direct schedules only, whose link is shorter), or -1 when it has none.
int direct_twin(const LinkSession& s, int e);

/// What an on-demand module links in the background from the start, in the
/// order it links them: the bucket of searches up to `k` of each of the
/// module's n_metrics metrics, alone and with each of its n_filters filters;
/// first the merges, then the direct twins (unfiltered, then filtered), then
/// the unfiltered scans, then the filtered ones, then the optional ones
/// (optional_entry).  Empty when k is 0.
std::vector<int> prefetch_order(const LinkSession& s, std::size_t n_metrics, std::size_t n_filters, uint32_t k);

/// When plan entry e's background link may start (LinkQueue's waves): once
/// no link of a lower wave is queued or running, so that concurrent links do
/// not slow down those a first search waits for.  Wave 0: what a first
/// search of a few queries runs (the merges, the direct twins, the scans
/// that have no twin); 1: the scans that have one; 2: the optional entries
/// (optional_entry).  A search links what it needs at once, whatever the wave.
int link_wave(const LinkSession& s, int e);

/// The state of a module linked on demand (udf_module_link_ex): the session,
/// which entries are loaded, and the background links (link_queue.h), one
/// link an entry, so that a search waits for the entries it runs and no
/// other (on_demand.cpp).
struct OnDemandLink {
  LinkSession session;
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  bool profile = false;      // UDF_PROFILE_LINK: each link's times on standard error
  std::vector<char> loaded;  // per plan entry; read and written by searches only (one thread at a time)
  std::vector<char> optional;  // per plan entry: optional_entry
  std::unique_ptr<LinkQueue> links;  // last member: destroyed (its running links waited for) first
};

}  // namespace udf::rt
