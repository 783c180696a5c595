// udf_module_link's C++ side (lib/runtime/module/link_session.cpp and
// capi/link_api.cpp) on a machine without a GPU: artifacts -> module for one
// arch through lib/link, the shared cache (same key as udf-link), and the
// status each failure maps to; and the background link queue of on-demand
// modules (module/link_queue.cpp) with a fake link.  The three runtime entry points they call are
// stubbed here; the real path (a loaded module) runs in the GPU checks
// (docs/runtime-interop.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "capi/api_guard.h"
#include "capi/link_api.h"
#include "module/link_queue.h"
#include "udf/artifact/artifact.h"
#include "udf/artifact/module.h"
#include "udf/link/link.h"
#include "udf/support/hash.h"

namespace udf::rt {
thread_local std::string g_stub_error;
void set_last_error(const std::string& m) { g_stub_error = m; }
}  // namespace udf::rt

static int g_arch = 90;
static int g_loads = 0;
extern "C" udf_status udf_runtime_device_info(const udf_runtime*, udf_device_info* out) {
  *out = udf_device_info{};
  std::snprintf(out->name, sizeof out->name, "stub GPU");
  out->arch = g_arch;
  return UDF_OK;
}
extern "C" udf_status udf_module_load_memory(udf_runtime*, const void* data, size_t size, const char* name,
                                             udf_module** out) {
  ++g_loads;
  auto m = udf::parse_module(std::span(static_cast<const std::uint8_t*>(data), size), name ? name : "");
  if (!m) {
    udf::rt::set_last_error(m.error().message());
    return UDF_ERROR_BAD_FORMAT;
  }
  *out = reinterpret_cast<udf_module*>(0x1234);
  return UDF_OK;
}

// On-demand modules need a GPU (lib/runtime/module/on_demand.cpp): not here.
udf_status udf::rt::load_on_demand(udf_runtime*, LinkSession, const std::string&, uint32_t, udf_module**) {
  return UDF_ERROR_NOT_IMPLEMENTED;
}

namespace {

const std::string kArtifact = UDF_TEST_ARTIFACT;
const std::string kFilterArtifact = UDF_TEST_FILTER_ARTIFACT;
const std::string kPruneArtifact = UDF_TEST_PRUNE_ARTIFACT;  // weighted L2 declared monotone
const std::string kPack = UDF_TEST_KERNEL_PACK;

std::string temp_dir(const char* tag) {
  auto d = std::filesystem::temp_directory_path() / (std::string("udf-link-api-") + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(RuntimeLink, LinksForOneArchAndSharesUdfLinksCacheKey) {
  std::string cache = temp_dir("cache");
  udf::rt::LinkModuleOptions opt{kPack, cache, false};
  udf::rt::LinkStage stage;
  auto r = udf::rt::link_module_for_arch({{kArtifact, {}, kArtifact}}, 90, opt, &stage);
  ASSERT_TRUE(r) << udf::rt::link_error_text(r.error());
  EXPECT_FALSE(r->cache_hit);
  auto m = udf::parse_module(r->bytes, "linked");
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->manifest.archs, std::vector<udf::Arch>{90});
  EXPECT_FALSE(m->manifest.entries.empty());

  // The key is udf-link's for the same artifact, pack, arch and emit kind.
  auto bytes = udf::read_file(kArtifact);
  ASSERT_TRUE(bytes);
  auto art = udf::parse_artifact(*bytes, kArtifact);
  ASSERT_TRUE(art);
  auto pack = udf::load_kernel_pack(kPack);
  ASSERT_TRUE(pack);
  std::vector<udf::LinkArtifact> arts{{kArtifact, *art, udf::sha256_hex(*bytes)}};
  auto plan = udf::plan_link(arts, *pack, {90});
  ASSERT_TRUE(plan);
  EXPECT_EQ(r->cache_key, udf::link_cache_key(arts, *pack, *plan, udf::EmitKind::Module));

  // From memory, the second time: a cache hit with the same bytes.
  auto again = udf::rt::link_module_for_arch({{"", *bytes, "mem"}}, 90, opt, &stage);
  ASSERT_TRUE(again) << udf::rt::link_error_text(again.error());
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(again->bytes, r->bytes);
  std::filesystem::remove_all(cache);
}

TEST(RuntimeLink, FailuresMapToStatuses) {
  udf::rt::LinkModuleOptions opt{kPack, std::nullopt, true};
  udf::rt::LinkStage stage;
  auto bad = udf::rt::link_module_for_arch({{"", udf::Bytes{'n', 'o', 'p', 'e'}, "junk.udfa"}}, 90, opt, &stage);
  ASSERT_FALSE(bad);
  EXPECT_EQ(udf::rt::link_stage_status(stage), UDF_ERROR_BAD_FORMAT);
  EXPECT_NE(udf::rt::link_error_text(bad.error()).find("junk.udfa"), std::string::npos);

  auto missing = udf::rt::link_module_for_arch({{"/nonexistent/a.udfa", {}, "/nonexistent/a.udfa"}}, 90, opt, &stage);
  ASSERT_FALSE(missing);
  EXPECT_EQ(udf::rt::link_stage_status(stage), UDF_ERROR_IO);

  // sm_80 cannot use an sm_90 payload.
  auto old = udf::rt::link_module_for_arch({{kArtifact, {}, kArtifact}}, 80, opt, &stage);
  ASSERT_FALSE(old);
  EXPECT_EQ(udf::rt::link_stage_status(stage), UDF_ERROR_MISMATCH);

  udf::rt::LinkModuleOptions nopack{std::string("/nonexistent/pack"), std::nullopt, true};
  auto np = udf::rt::link_module_for_arch({{kArtifact, {}, kArtifact}}, 90, nopack, &stage);
  ASSERT_FALSE(np);
  EXPECT_EQ(udf::rt::link_stage_status(stage), UDF_ERROR_IO);
}

TEST(RuntimeLink, CApiArguments) {
  udf_module* m = reinterpret_cast<udf_module*>(0x1);
  udf_artifact_source src{kArtifact.c_str(), nullptr, 0, nullptr};
  EXPECT_EQ(udf_module_link(nullptr, &src, 1, &m), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  auto* rt = reinterpret_cast<udf_runtime*>(0x1);
  EXPECT_EQ(udf_module_link(rt, nullptr, 0, &m), UDF_ERROR_INVALID_ARGUMENT);
  udf_artifact_source empty{nullptr, nullptr, 0, nullptr};
  EXPECT_EQ(udf_module_link(rt, &empty, 1, &m), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(udf::rt::g_stub_error.find("neither a path nor data"), std::string::npos);
  const char junk[] = "not an artifact";
  udf_artifact_source mem{nullptr, junk, sizeof junk, "junk"};
  EXPECT_EQ(udf_module_link(rt, &mem, 1, &m), UDF_ERROR_BAD_FORMAT);
  EXPECT_NE(udf::rt::g_stub_error.find("junk"), std::string::npos);
  g_arch = 42;
  EXPECT_EQ(udf_module_link(rt, &src, 1, &m), UDF_ERROR_UNSUPPORTED);
  g_arch = 90;
}

TEST(RuntimeLink, CApiLinksAndLoads) {
  setenv("UDF_KERNEL_PACK_DIR", kPack.c_str(), 1);
  std::string cache = temp_dir("capi");
  setenv("UDF_CACHE_DIR", cache.c_str(), 1);
  udf_module* m = nullptr;
  udf_artifact_source src{kArtifact.c_str(), nullptr, 0, nullptr};
  int loads = g_loads;
  ASSERT_EQ(udf_module_link(reinterpret_cast<udf_runtime*>(0x1), &src, 1, &m), UDF_OK) << udf::rt::g_stub_error;
  EXPECT_EQ(m, reinterpret_cast<udf_module*>(0x1234));
  EXPECT_EQ(g_loads, loads + 1);
  unsetenv("UDF_CACHE_DIR");
  unsetenv("UDF_KERNEL_PACK_DIR");
  std::filesystem::remove_all(cache);
}

}  // namespace

// The entries a search of k links on demand (udf_module_link_ex): the smallest
// k bucket at or above k with a merge of its order, that bucket's scans of the
// metric (and filter), and the merge.
TEST(RuntimeLink, BucketEntriesOfASearch) {
  udf::rt::LinkModuleOptions opt{kPack, std::nullopt, true};
  auto s = udf::rt::prepare_link({{kArtifact, {}, kArtifact}}, 90, opt);
  ASSERT_TRUE(s) << udf::rt::link_error_text(s.error());
  auto names = [&](uint32_t k, int filter = -1) {
    std::vector<std::string> out;
    for (int e : udf::rt::bucket_entries_for(*s, 0, filter, k)) out.push_back(s->plan.entries[e].name);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(1), (V{"udf_ivf_scan_v1__weighted_l2__f32_f32_min_k32", "udf_ivf_merge_v1_min_k32"}));
  EXPECT_EQ(names(32), names(1));
  EXPECT_EQ(names(33), (V{"udf_ivf_scan_v1__weighted_l2__f32_f32_min_k128", "udf_ivf_merge_v1_min_k128"}));
  EXPECT_EQ(names(1024), (V{"udf_ivf_scan_v1__weighted_l2__f32_f32_min_k1024", "udf_ivf_merge_v1_min_k1024"}));
  EXPECT_TRUE(names(1025).empty());
  EXPECT_TRUE(names(10, 0).empty()) << "no filter linked";
  EXPECT_TRUE(udf::rt::bucket_entries_for(*s, 1, -1, 10).empty()) << "no second metric";

  // max_k caps the plan, and so the buckets.
  opt.max_k = 100;
  auto capped = udf::rt::prepare_link({{kArtifact, {}, kArtifact}}, 90, opt);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->plan.max_k, 128);
  EXPECT_EQ(capped->plan.entries.size(), 4u);
  EXPECT_TRUE(udf::rt::bucket_entries_for(*capped, 0, -1, 129).empty());
}

// What an on-demand module links in the background from the start, one link
// an entry, in this order: the merges, the metric's scans, its filtered
// scans, and last the pruning scan, which a search can do without
// (optional_entry): it waits for the others only.
TEST(RuntimeLink, PrefetchOrderPutsTheMergesFirstAndThePruningScanLast) {
  udf::rt::LinkModuleOptions opt{kPack, std::nullopt, true};
  auto s = udf::rt::prepare_link({{kPruneArtifact, {}, kPruneArtifact}, {kFilterArtifact, {}, kFilterArtifact}}, 90, opt);
  ASSERT_TRUE(s) << udf::rt::link_error_text(s.error());
  using V = std::vector<std::string>;
  auto names = [&](const std::vector<int>& entries) {
    V v;
    for (int e : entries) v.push_back(s->plan.entries[e].name);
    return v;
  };
  EXPECT_EQ(names(udf::rt::prefetch_order(*s, 1, 1, 32)),
            (V{"udf_ivf_merge_v1_min_k32", "udf_ivf_scan_v1__weighted_l2__f32_f32_min_k32",
               "udf_ivf_scan_v1__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32",
               "udf_ivf_scan_v1_prune__weighted_l2__f32_f32_min_k32",
               "udf_ivf_scan_v1_prune__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32"}))
      << "the pruning scans last, the filtered one too (pack 1.16)";
  EXPECT_EQ(names(udf::rt::prefetch_order(*s, 1, 1, 100)),
            (V{"udf_ivf_merge_v1_min_k128", "udf_ivf_scan_v1__weighted_l2__f32_f32_min_k128",
               "udf_ivf_scan_v1__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k128"}))
      << "no pruning scan beyond k 32";
  EXPECT_EQ(names(udf::rt::prefetch_order(*s, 1, 0, 32)),
            (V{"udf_ivf_merge_v1_min_k32", "udf_ivf_scan_v1__weighted_l2__f32_f32_min_k32",
               "udf_ivf_scan_v1_prune__weighted_l2__f32_f32_min_k32"}))
      << "no filter";
  EXPECT_TRUE(udf::rt::prefetch_order(*s, 1, 1, 0).empty()) << "prefetch_k 0: nothing";
  EXPECT_TRUE(udf::rt::prefetch_order(*s, 1, 1, 1025).empty()) << "no bucket that large";

  // Optional: the pruning scans only; a search's bucket lists its own with the rest.
  V optional, bucket;
  for (std::size_t e = 0; e < s->plan.entries.size(); ++e)
    if (udf::rt::optional_entry(*s, static_cast<int>(e))) optional.push_back(s->plan.entries[e].name);
  EXPECT_EQ(optional, (V{"udf_ivf_scan_v1_prune__weighted_l2__f32_f32_min_k32",
                         "udf_ivf_scan_v1_prune__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32"}));
  EXPECT_EQ(names(udf::rt::bucket_entries_for(*s, 0, -1, 10)).size(), 3u);
  EXPECT_EQ(names(udf::rt::bucket_entries_for(*s, 0, 0, 10)),
            (V{"udf_ivf_scan_v1__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32",
               "udf_ivf_scan_v1_prune__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32", "udf_ivf_merge_v1_min_k32"}))
      << "a filtered search's bucket: its scan, its pruning twin, the merge";
  EXPECT_FALSE(udf::rt::optional_entry(*s, -1));
  EXPECT_FALSE(udf::rt::optional_entry(*s, static_cast<int>(s->plan.entries.size())));

  // A metric that is not monotone has no pruning scan: nothing is optional.
  auto plain = udf::rt::prepare_link({{kArtifact, {}, kArtifact}}, 90, opt);
  ASSERT_TRUE(plain) << udf::rt::link_error_text(plain.error());
  for (std::size_t e = 0; e < plain->plan.entries.size(); ++e)
    EXPECT_FALSE(udf::rt::optional_entry(*plain, static_cast<int>(e))) << plain->plan.entries[e].name;
}

// On demand (LinkModuleOptions::direct), each plain scan has a direct twin
// (ivf_flat_v1.h, DIRECT TWIN): the same variant, its arguments' copy given
// queries_per_item 1, which LTO folds into one query an item's code.  The
// twins link right after the merges; a bucket is still its scans (a search
// that is not a direct schedule never waits for a twin), and a module of
// udf-link (no `direct`) has none.  Linked for sm_90, a twin's cubin is
// smaller than its scan's: the constant reached the scan.
TEST(RuntimeLink, DirectTwinsComeFirstAndCompileToLessCode) {
  udf::rt::LinkModuleOptions opt{kPack, std::nullopt, true};
  opt.direct = true;
  auto s = udf::rt::prepare_link({{kPruneArtifact, {}, kPruneArtifact}, {kFilterArtifact, {}, kFilterArtifact}}, 90, opt);
  ASSERT_TRUE(s) << udf::rt::link_error_text(s.error());
  using V = std::vector<std::string>;
  auto names = [&](const std::vector<int>& entries) {
    V v;
    for (int e : entries) v.push_back(s->plan.entries[e].name);
    return v;
  };
  const std::string scan = "udf_ivf_scan_v1__weighted_l2__f32_f32_min_k32",
                    filtered = "udf_ivf_scan_v1__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32";
  EXPECT_EQ(names(udf::rt::prefetch_order(*s, 1, 1, 32)),
            (V{"udf_ivf_merge_v1_min_k32", scan + "__direct", filtered + "__direct", scan, filtered,
               "udf_ivf_scan_v1_prune__weighted_l2__f32_f32_min_k32",
               "udf_ivf_scan_v1_prune__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32"}));
  EXPECT_EQ(names(udf::rt::bucket_entries_for(*s, 0, 0, 10)),
            (V{filtered, "udf_ivf_scan_v1_prune__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32",
               "udf_ivf_merge_v1_min_k32"}))
      << "a bucket holds no twin";
  auto entry = [](const udf::rt::LinkSession& session, const std::string& name) {
    for (std::size_t i = 0; i < session.plan.entries.size(); ++i)
      if (session.plan.entries[i].name == name) return static_cast<int>(i);
    return -1;
  };
  // The background's waves (link_wave): what a first search of a few
  // queries runs, then the scans it does not, then the pruning scans.
  std::map<std::string, int> waves;
  for (const std::string& name : names(udf::rt::prefetch_order(*s, 1, 1, 32))) waves[name] = udf::rt::link_wave(*s, entry(*s, name));
  EXPECT_EQ(waves, (std::map<std::string, int>{{"udf_ivf_merge_v1_min_k32", 0},
                                               {scan + "__direct", 0},
                                               {filtered + "__direct", 0},
                                               {scan, 1},
                                               {filtered, 1},
                                               {"udf_ivf_scan_v1_prune__weighted_l2__f32_f32_min_k32", 2},
                                               {"udf_ivf_scan_v1_prune__weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32", 2}}));
  std::size_t twins = 0;
  for (std::size_t e = 0; e < s->plan.entries.size(); ++e) {
    const udf::ModuleEntry& me = s->plan.entries[e];
    const int twin = udf::rt::direct_twin(*s, static_cast<int>(e));
    const bool plain = s->plan.planned[e].metric >= 0 && !me.launch.count("prune") && !me.launch.count("rows") &&
                       !me.launch.count("direct_only");
    if (!plain) {
      EXPECT_EQ(twin, -1) << me.name;
      continue;
    }
    ASSERT_GE(twin, 0) << me.name;
    ++twins;
    const udf::ModuleEntry& t = s->plan.entries[twin];
    EXPECT_EQ(t.name, me.name + "__direct");
    EXPECT_EQ(t.variant, me.variant);
    EXPECT_EQ(t.launch.at("direct_only"), 1);
    auto rest = t.launch;
    rest.erase("direct_only");
    EXPECT_EQ(rest, me.launch) << "launched as its scan";
    EXPECT_NE(s->plan.planned[twin].wrapper.find("a.entry_flags = 1u;"), std::string::npos) << s->plan.planned[twin].wrapper;
    EXPECT_NE(s->plan.planned[e].wrapper.find("a.entry_flags = 0u;"), std::string::npos) << s->plan.planned[e].wrapper;
    EXPECT_EQ(udf::rt::direct_twin(*s, twin), -1) << "a twin has no twin";
    EXPECT_FALSE(udf::rt::optional_entry(*s, twin));
  }
  EXPECT_EQ(twins, 8u) << "4 k buckets, unfiltered and filtered";

  // sm_90 cubins of the filtered k 32 scan and its twin (no cache).
  const int e = entry(*s, filtered);
  ASSERT_GE(e, 0);
  std::vector<std::string> warnings;
  auto out = udf::rt::link_entries(*s, {e, udf::rt::direct_twin(*s, e)}, warnings);
  ASSERT_TRUE(out) << udf::rt::link_error_text(out.error());
  ASSERT_EQ(out->module.images.size(), 2u);
  ASSERT_EQ(out->linked_entries.size(), 2u);
  const std::size_t at = out->linked_entries[0] == e ? 0 : 1;
  const std::size_t full = out->module.images[at].size(), direct = out->module.images[1 - at].size();
  EXPECT_LT(direct * 10, full * 9) << "the twin's module " << direct << " bytes against " << full;

  // Without `direct` (udf-link's plan, a whole module): no twin, and the
  // module's key is the one it had before twins existed.
  opt.direct = false;
  auto whole = udf::rt::prepare_link({{kPruneArtifact, {}, kPruneArtifact}, {kFilterArtifact, {}, kFilterArtifact}}, 90, opt);
  ASSERT_TRUE(whole) << udf::rt::link_error_text(whole.error());
  EXPECT_EQ(whole->plan.entries.size() + twins, s->plan.entries.size());
  for (const auto& me : whole->plan.entries) EXPECT_FALSE(me.launch.count("direct_only")) << me.name;
  EXPECT_NE(whole->cache_key, s->cache_key);
  EXPECT_EQ(udf::rt::link_wave(*whole, entry(*whole, filtered)), 0) << "a scan with no twin: in the first wave";
}

// ---------------------------------------------------------------- LinkQueue
// An on-demand module's background links (module/link_queue.h), with a fake
// link: each call records the entries it links, in the order their links
// started and which links were running then; the entries in `held` wait for
// release(), and those in `failing` fail.

namespace {

using udf::rt::LinkQueue;
using namespace std::chrono_literals;

struct FakeLinks {
  std::mutex mu;
  std::vector<int> started;                   // entries, in the order their links started
  std::map<int, std::set<int>> running_then;  // entry -> the entries being linked when its link started
  std::set<int> running, held, failing;
  std::atomic<bool> released{false};

  LinkQueue::LinkFn fn() {
    return [this](const std::vector<int>& entries) {
      bool hold = false, fails = false;
      {
        std::lock_guard lock(mu);
        for (int e : entries) {
          started.push_back(e);
          running_then[e] = running;
          hold = hold || held.count(e);
          fails = fails || failing.count(e);
        }
        running.insert(entries.begin(), entries.end());
      }
      while (hold && !released.load()) std::this_thread::sleep_for(1ms);
      {
        std::lock_guard lock(mu);
        for (int e : entries) running.erase(e);
      }
      LinkQueue::Linked r;
      if (fails) r.out = udf::internal_error("fake link failure");
      else r.out = udf::LinkOutput{};
      return r;
    };
  }
  void release() { released.store(true); }
  std::vector<int> started_now() {
    std::lock_guard lock(mu);
    return started;
  }
  // Until `n` links have started (at most 10 s).
  bool await_started(std::size_t n) {
    for (int i = 0; i < 10000 && started_now().size() < n; ++i) std::this_thread::sleep_for(1ms);
    return started_now().size() >= n;
  }
};

}  // namespace

// The workers link the queued entries in order, a later wave's (entry 3)
// only once every other link is over, alone.
TEST(LinkQueue, LinksInOrderAndALaterWaveWhenTheRestIsDone) {
  for (unsigned workers : {1u, 4u}) {
    SCOPED_TRACE(std::to_string(workers) + " workers");
    FakeLinks fake;
    fake.held = {0};
    {
      LinkQueue q(fake.fn(), {0, 0, 0, 1}, workers);
      q.queue({0, 1, 2, 3});
      ASSERT_TRUE(fake.await_started(workers == 1 ? 1 : 3));
      std::this_thread::sleep_for(20ms);
      const std::vector<int> held = fake.started_now();
      EXPECT_EQ(std::count(held.begin(), held.end(), 3), 0) << "the later wave's link started while entry 0's ran";
      fake.release();
      ASSERT_TRUE(fake.await_started(4));
    }
    const std::vector<int> started = fake.started_now();
    if (workers == 1) {
      EXPECT_EQ(started, (std::vector<int>{0, 1, 2, 3}));
    }
    EXPECT_EQ(started.back(), 3);
    EXPECT_TRUE(fake.running_then[3].empty()) << "the later wave's link shared the CPU with another";
  }
}

// Three waves and workers to spare: each wave starts once the waves before
// it are done, whatever the workers; a search takes a later wave's job at
// once and links it itself.
TEST(LinkQueue, AWaveStartsOnceTheWavesBeforeItAreDone) {
  FakeLinks fake;
  fake.held = {0, 1};
  LinkQueue q(fake.fn(), {0, 0, 1, 1, 2}, 8);
  q.queue({0, 1, 2, 3, 4});
  ASSERT_TRUE(fake.await_started(2));
  std::this_thread::sleep_for(20ms);
  std::vector<int> first = fake.started_now();
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, (std::vector<int>{0, 1})) << "a later wave started while the first one ran";
  const LinkQueue::Claim mine = q.claim({3});
  EXPECT_EQ(mine.now, (std::vector<int>{3})) << "a search waits for no wave";
  EXPECT_EQ(mine.taken.size(), 1u);
  q.finish(mine);
  fake.release();
  ASSERT_TRUE(fake.await_started(4));
  const LinkQueue::Claim rest = q.claim({2, 4});
  q.wait(rest);
  const std::vector<int> started = fake.started_now();
  EXPECT_EQ(std::vector<int>(started.begin() + 2, started.end()), (std::vector<int>{2, 4}));
  EXPECT_TRUE(fake.running_then[2].empty()) << "wave 1 shared the CPU with wave 0";
  EXPECT_TRUE(fake.running_then[4].empty()) << "wave 2 shared the CPU with wave 1";
}

// A search takes a queued job and links it itself with the entries that have
// none; it awaits the job a worker runs; no worker links an entry a search took.
TEST(LinkQueue, ASearchTakesWhatNoWorkerStartedAndAwaitsTheRest) {
  FakeLinks fake;
  fake.held = {0};
  LinkQueue q(fake.fn(), {0, 0, 0, 0, 0, 0}, 1);
  q.queue({0, 1, 2});
  ASSERT_TRUE(fake.await_started(1));  // the worker holds entry 0
  const LinkQueue::Claim mine = q.claim({1, 5});
  EXPECT_EQ(mine.now, (std::vector<int>{1, 5}));
  ASSERT_EQ(mine.taken.size(), 1u);
  EXPECT_EQ(mine.taken[0]->entry, 1);
  EXPECT_TRUE(mine.awaited.empty());
  q.finish(mine);
  const LinkQueue::Claim first = q.claim({0});
  EXPECT_TRUE(first.now.empty());
  ASSERT_EQ(first.awaited.size(), 1u);
  fake.release();
  q.wait(first);
  EXPECT_EQ(first.awaited[0]->state, LinkQueue::State::Done);
  EXPECT_TRUE(static_cast<bool>(first.awaited[0]->linked.out));
  ASSERT_TRUE(fake.await_started(2));
  const LinkQueue::Claim last = q.claim({2});
  q.wait(last);  // a worker's: done, or soon
  EXPECT_TRUE(last.now.empty());
  EXPECT_EQ(fake.started_now(), (std::vector<int>{0, 2})) << "a worker linked entry 1, which the search took";
}

// A worker's link that fails: a search awaits it and gets the error; once
// told (mark_failed), the next claim links the entry itself.  An optional
// entry's failure is queued again by the next search that asks for it.
TEST(LinkQueue, AFailedLinkIsLinkedAgainByTheNextSearch) {
  FakeLinks fake;
  fake.held = {0};
  fake.failing = {0, 1};
  LinkQueue q(fake.fn(), {0, 1}, 2);
  q.queue({0});
  ASSERT_TRUE(fake.await_started(1));
  const LinkQueue::Claim c = q.claim({0});
  ASSERT_EQ(c.awaited.size(), 1u);
  fake.release();
  q.wait(c);
  ASSERT_FALSE(static_cast<bool>(c.awaited[0]->linked.out));
  EXPECT_NE(c.awaited[0]->linked.out.error().message().find("fake link failure"), std::string::npos);
  q.mark_failed(*c.awaited[0]);
  const LinkQueue::Claim again = q.claim({0});
  EXPECT_EQ(again.now, (std::vector<int>{0}));
  EXPECT_EQ(again.taken.size(), 1u);
  q.finish(again);

  EXPECT_TRUE(q.done_optional({1}).empty()) << "not linked yet: queued now";
  std::vector<LinkQueue::Job*> done;
  for (int i = 0; i < 10000 && done.empty(); ++i, std::this_thread::sleep_for(1ms)) done = q.done_optional({1});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(static_cast<bool>(done[0]->linked.out));
  q.mark_failed(*done[0]);
  EXPECT_TRUE(q.done_optional({1}).empty()) << "queued again";
  ASSERT_TRUE(fake.await_started(3));
  const std::vector<int> started = fake.started_now();
  EXPECT_EQ(std::count(started.begin(), started.end(), 1), 2) << "entry 1 linked twice";
}

// The queue's end drops the jobs no worker started and waits for the running ones.
TEST(LinkQueue, ItsEndWaitsForTheRunningLinksAndDropsTheQueued) {
  FakeLinks fake;
  fake.held = {0};
  auto q = std::make_unique<LinkQueue>(fake.fn(), std::vector<int>{0, 0, 0}, 1);
  q->queue({0, 1, 2});
  ASSERT_TRUE(fake.await_started(1));
  std::atomic<bool> ending{false};
  std::thread later([&] {
    while (!ending.load()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(200ms);  // the queue's end has begun by then
    fake.release();
  });
  ending.store(true);
  q.reset();  // returns once entry 0's link is over
  later.join();
  EXPECT_TRUE(fake.released.load());
  EXPECT_EQ(fake.started_now(), (std::vector<int>{0}));
}
