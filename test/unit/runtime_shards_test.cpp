// Indexes over several GPUs (include/udf/runtime.h, "several GPUs"), on the
// GPU: a sharded index (udf_index_build_sharded, udf_index_load_sharded)
// searches exactly as the one-GPU index over the same lists -- ids equal,
// distances equal bit for bit -- and reports its shards.
//
//   Metrics/ShardedSearch.MatchesOneGpuBitForBit/*  built-in l2 and inner product (max order), weighted_l2 (a
//                                captured array), int8, f16, a monotone metric (prune.udfm: the k <= 32
//                                scans prune) and a filter pair (filters.udfm: a bitmap, a per-query
//                                filter); clustered data and a grid of ties; batches 1, 100 and 3000,
//                                k 10 and 100, n_probes 1, 8 and 32
//   Shards.FewVectorsPerShardAndPadding  few lists, shards holding fewer than k vectors, padding rows
//   Shards.ShardInfoOfOneGpuAndShardedIndexes  udf_index_shard_count / _info / _transport, bad arguments;
//                                one module, and one runtime's module listed twice
//   Shards.TwoGpusTransport      {0,1}: NCCL when libnccl.so.2 loads, else peer copies; UDF_NCCL=0
//   Shards.SaveAndLoadOnOneOrSeveralGpus  a sharded index's file is the one-GPU file; it loads both ways
//   Shards.AddGivesTheOneGpuResults  host rows with default and explicit ids, device rows
//   Shards.ChunkedBuildIsBuildThenAdd  udf_index_build_chunked on one GPU and sharded: build + adds' results
//   Shards.GivenCentroidsReplaceKmeans  udf_index_params.centroids / udf_index_centroids; parts of the
//                                rows over shared centroids merge to the one index's top-k (udf.dask)
//   Shards.AsyncSearchAndDeviceMemoryOnTheFirstDevice  device queries, captures, outputs; async on the
//                                first device's streams
//   Shards.DeviceArrayCapturesOnEveryShard  udf_device_array weights and bitmap: the host arrays' results
//   Shards.Errors                bad modules, a missing metric, udf_index_with_metric, bad files
//   Shards.AllListsProbedMatchFloat64  against the float64 brute force
//
// Shards on one GPU ({0,0} and {0,0,0}: a runtime each on ordinal 0, the
// device listed again) run wherever there is a GPU; {0,1} needs a second
// GPU and is left out, saying why, without one.  The seed of each test is
// printed.
//
// The tests compare indexes built one after the other, so two builds with
// one seed must give the same lists.  k-means sums its members with float
// atomics, whose order varies from run to run: the float data here lies on a
// grid of 1/8 with |x| < 16, which such sums add exactly in any order.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <utility>

#include "runtime_test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool contains_nocase(std::string hay, std::string needle) {
  auto lower = [](std::string& s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  lower(hay);
  lower(needle);
  return hay.find(needle) != std::string::npos;
}

std::string fmt_float(float f) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", static_cast<double>(f));
  return b;
}

struct IndexDeleter {
  void operator()(udf_index* ix) const { udf_index_destroy(ix); }
};
using Index = std::unique_ptr<udf_index, IndexDeleter>;

// ------------------------------------------------------------------ runtimes, modules, layouts

// The runtimes shards run on: gpu().rt and two more on ordinal 0 (a device
// listed more than once), and one on ordinal 1 when there is a second GPU.
struct Pool {
  std::vector<udf_runtime*> zero;  // zero[0] is gpu().rt
  std::string zero_error;          // why a second runtime on ordinal 0 failed
  udf_runtime* one = nullptr;
  std::string no_one;              // why there is no runtime on ordinal 1
};
Pool& pool() {
  static Pool p = [] {
    Pool x;
    x.zero.push_back(gpu().rt);
    for (int i = 0; i < 2; ++i) {
      udf_runtime* rt = nullptr;
      const udf_status s = udf_runtime_create(0, &rt);
      if (s != UDF_OK) {
        x.zero_error = std::string("udf_runtime_create(0): ") + udf_status_name(s) + ": " + udf_last_error();
        break;
      }
      x.zero.push_back(rt);
    }
    const udf_status s = udf_runtime_create(1, &x.one);
    if (s != UDF_OK) {
      x.one = nullptr;
      x.no_one = std::string("no second GPU (udf_runtime_create(1): ") + udf_status_name(s) + ": " + udf_last_error() + ")";
    }
    return x;
  }();
  return p;
}

// The devices of a sharded index and the runtime of each.
struct Layout {
  std::string name;  // "{0,0} by lists"
  std::vector<udf_runtime*> rts;
  std::vector<int32_t> devices;
  uint32_t shard_layout;  // UDF_SHARD_BY_LISTS / _VECTORS
};

// {0,0} by lists, {0,0,0} by vectors and, with a second GPU, {0,1} by lists
// and by vectors (else the reason is printed).
std::vector<Layout> layouts() {
  Pool& p = pool();
  EXPECT_EQ(p.zero.size(), 3u) << p.zero_error;
  if (p.zero.size() < 3) return {};
  std::vector<Layout> v = {{"{0,0} by lists", {p.zero[0], p.zero[1]}, {0, 0}, UDF_SHARD_BY_LISTS},
                           {"{0,0,0} by vectors", {p.zero[0], p.zero[1], p.zero[2]}, {0, 0, 0}, UDF_SHARD_BY_VECTORS}};
  if (p.one) {
    v.push_back({"{0,1} by lists", {p.zero[0], p.one}, {0, 1}, UDF_SHARD_BY_LISTS});
    v.push_back({"{0,1} by vectors", {p.zero[0], p.one}, {0, 1}, UDF_SHARD_BY_VECTORS});
  } else {
    std::printf("[ SKIPPED  ] devices {0,1}: %s\n", p.no_one.c_str());
  }
  return v;
}

// `file` (in module_dir()) loaded by `rt`, once per process.
udf_status module_on(udf_runtime* rt, const std::string& file, udf_module** out, std::string* why) {
  static std::map<std::pair<udf_runtime*, std::string>, udf_module*> cache;
  auto it = cache.find({rt, file});
  if (it != cache.end()) {
    *out = it->second;
    return UDF_OK;
  }
  const udf_status s = udf_module_load_file(rt, (module_dir() + "/" + file).c_str(), out);
  if (s != UDF_OK) {
    *why = file + ": " + udf_status_name(s) + ": " + udf_last_error();
    return s;
  }
  cache[{rt, file}] = *out;
  return UDF_OK;
}

// modules[i]: `file` loaded by the i-th runtime.
struct Modules {
  std::vector<udf_module*> m;
  udf_status status = UDF_OK;
  std::string why;
};
Modules modules_for(const std::vector<udf_runtime*>& rts, const std::string& file) {
  Modules r;
  for (udf_runtime* rt : rts) {
    udf_module* m = nullptr;
    r.status = module_on(rt, file, &m, &r.why);
    if (r.status != UDF_OK) return r;
    r.m.push_back(m);
  }
  return r;
}

// prune.udfm and filters.udfm hold sm_90 code only: another GPU skips.
#define LOAD_MODULES(var, rts, file)                                                               \
  Modules var = modules_for(rts, file);                                                            \
  if (var.status == UDF_ERROR_NO_BINARY_FOR_GPU) GTEST_SKIP() << "no code for this GPU: " << var.why; \
  ASSERT_EQ(var.status, UDF_OK) << var.why

// LOAD_MODULES for each layout of `lay`: mods[i] holds lay[i]'s modules.
#define LOAD_LAYOUT_MODULES(mods, lay, file)     \
  std::vector<std::vector<udf_module*>> mods;   \
  for (const Layout& layout_ : lay) {           \
    LOAD_MODULES(loaded_, layout_.rts, file);   \
    mods.push_back(loaded_.m);                  \
  }

udf_metric_info metric_info(udf_module* m, const char* metric) {
  size_t i = 0;
  udf_metric_info mi{};
  EXPECT_EQ(udf_module_find_metric(m, metric, &i), UDF_OK) << udf_last_error();
  EXPECT_EQ(udf_module_metric_info(m, i, &mi), UDF_OK) << udf_last_error();
  return mi;
}

// The k values a test searches: 10, and 100 where the module links k > 32
// (a build with UDF_TEST_MODULES_MAX_K=32 does not; then it is said).
std::vector<uint32_t> ks_for(udf_module* m, const char* metric) {
  const uint32_t max_k = metric_info(m, metric).max_k;
  if (max_k >= 100) return {10, 100};
  std::printf("[   NOTE   ] %s: the module links k <= %u only: k 100 left out\n", metric, max_k);
  return {10};
}

// ------------------------------------------------------------------ transport

// What udf_index_shard_transport must say for these devices (runtime.h):
// "none" for one shard; "peer" when a device repeats or UDF_NCCL=0; else
// "nccl" when libnccl.so.2 ($UDF_NCCL_LIBRARY, else the system's) loads,
// "peer" when it does not.  *why says which rule decided.
std::string expected_transport(const std::vector<int32_t>& devices, std::string* why = nullptr) {
  std::string reason, t;
  const std::set<int32_t> distinct(devices.begin(), devices.end());
  const char* nccl = std::getenv("UDF_NCCL");
  if (devices.size() <= 1) {
    t = "none", reason = "one shard";
  } else if (distinct.size() < devices.size()) {
    t = "peer", reason = "a device repeats";
  } else if (nccl && std::string(nccl) == "0") {
    t = "peer", reason = "UDF_NCCL=0";
  } else {
    const char* env = std::getenv("UDF_NCCL_LIBRARY");
    const std::string lib = env && *env ? env : "libnccl.so.2";
    if (dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      t = "nccl", reason = lib + " loads";
    } else {
      const char* e = dlerror();
      t = "peer", reason = lib + " does not load (" + (e ? e : "?") + ")";
    }
  }
  if (why) *why = reason;
  return t;
}

// ------------------------------------------------------------------ data

// Float values onto the grid of 1/8 (|x| < 16; exact in f16 too); i8 and u8
// are integers already.
void snap(Data& d) {
  if (d.dtype != UDF_DTYPE_F32 && d.dtype != UDF_DTYPE_F16) return;
  for (size_t i = 0; i < d.v.size(); ++i) {
    const double x = std::clamp(std::round(d.v[i] * 8.0) / 8.0, -15.875, 15.875);
    d.v[i] = x;
    if (d.dtype == UDF_DTYPE_F32) {
      const float f = static_cast<float>(x);
      std::memcpy(&d.bytes[i * 4], &f, 4);
    } else {
      const uint16_t h = f32_to_f16(static_cast<float>(x));
      std::memcpy(&d.bytes[i * 2], &h, 2);
    }
  }
}

// Row `to` := row `from` (an exact duplicate: ties at every distance).
void copy_row(Data& d, int64_t from, int64_t to) {
  const size_t rb = size_t(d.dim) * udf_dtype_size(d.dtype);
  std::memcpy(&d.bytes[to * rb], &d.bytes[from * rb], rb);
  std::copy_n(d.v.begin() + from * d.dim, d.dim, d.v.begin() + to * d.dim);
}

// Clustered data around `centers`, snapped, with about 5% of the rows copies
// of earlier ones.
Data clustered(std::mt19937_64& rng, udf_dtype t, int64_t rows, int64_t dim, const std::vector<double>& centers) {
  Data d = make_data(rng, t, rows, dim, static_cast<int>(centers.size() / dim), &centers);
  snap(d);
  std::bernoulli_distribution dup(0.05);
  for (int64_t r = 1; r < rows; ++r)
    if (dup(rng)) copy_row(d, std::uniform_int_distribution<int64_t>(0, r - 1)(rng), r);
  return d;
}

std::vector<double> centers_for(std::mt19937_64& rng, int clusters, int64_t dim) {
  std::vector<double> c(size_t(clusters) * dim);
  std::normal_distribution<double> nd(0, 1.5);
  for (double& x : c) x = nd(rng);
  return c;
}

// Values 0 .. levels-1 in any element type: many exactly equal distances.
Data grid(std::mt19937_64& rng, udf_dtype t, int64_t rows, int64_t dim, int levels = 4) {
  Data d;
  d.dtype = t;
  d.rows = rows;
  d.dim = dim;
  d.bytes.resize(size_t(rows * dim) * udf_dtype_size(t));
  d.v.resize(size_t(rows * dim));
  std::uniform_int_distribution<int> g(0, levels - 1);
  for (int64_t i = 0; i < rows * dim; ++i) {
    const int x = g(rng);
    d.v[i] = x;
    switch (t) {
      case UDF_DTYPE_F32: {
        const float f = static_cast<float>(x);
        std::memcpy(&d.bytes[i * 4], &f, 4);
        break;
      }
      case UDF_DTYPE_F16: {
        const uint16_t h = f32_to_f16(static_cast<float>(x));
        std::memcpy(&d.bytes[i * 2], &h, 2);
        break;
      }
      default:
        d.bytes[i] = static_cast<uint8_t>(x);
        break;
    }
  }
  return d;
}

Data concat(const Data& a, const Data& b) {
  Data d = a;
  d.rows += b.rows;
  d.bytes.insert(d.bytes.end(), b.bytes.begin(), b.bytes.end());
  d.v.insert(d.v.end(), b.v.begin(), b.v.end());
  return d;
}

// Weights of weighted_l2: multiples of 1/4 in [1/4, 3] (sums of snapped
// data stay exact enough to tie), one of them 0 (still monotone).
std::vector<float> weights_for(std::mt19937_64& rng, int64_t dim) {
  std::vector<float> w(dim);
  std::uniform_int_distribution<int> q(1, 12);
  for (float& x : w) x = static_cast<float>(q(rng)) / 4.0f;
  w[dim / 2] = 0.0f;
  return w;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// ------------------------------------------------------------------ builds and searches

udf_index_params index_params(uint32_t n_lists, uint64_t seed, double balance = 2.0, uint32_t iters = 5) {
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = n_lists;
  p.seed = seed;
  p.balance = balance;
  p.kmeans_iters = iters;
  return p;
}

Index build_one(udf_module* m, const char* metric, const Data& d, const udf_index_params& p) {
  udf_tensor t = d.tensor();
  udf_index* ix = nullptr;
  EXPECT_EQ(udf_index_build(m, metric, &t, nullptr, &p, &ix), UDF_OK) << udf_last_error();
  return Index(ix);
}

Index build_sharded(const std::vector<udf_module*>& mods, const char* metric, const Data& d, const udf_index_params& params,
                    uint32_t shard_layout) {
  udf_tensor t = d.tensor();
  udf_index* ix = nullptr;
  udf_index_params p = params;
  p.shard_layout = shard_layout;
  EXPECT_EQ(udf_index_build_sharded(mods.data(), mods.size(), metric, &t, nullptr, &p, &ix), UDF_OK)
      << udf_last_error();
  return Index(ix);
}

Index load_sharded(const std::vector<udf_module*>& mods, const std::string& path, uint32_t shard_layout) {
  udf_index* ix = nullptr;
  EXPECT_EQ(udf_index_load_sharded_layout(mods.data(), mods.size(), path.c_str(), shard_layout, &ix), UDF_OK)
      << udf_last_error();
  return Index(ix);
}

// One search request: k, n_probes, chunking, captures and filter.
struct Search {
  uint32_t k = 10, probes = 8, max_batch = 0;
  const std::vector<udf_capture_binding>* captures = nullptr;
  const char* filter = nullptr;
  const std::vector<udf_capture_binding>* filter_captures = nullptr;
  udf_search_params params() const {
    udf_search_params p;
    udf_search_params_default(&p);
    p.k = k;
    p.n_probes = probes;
    p.max_batch = max_batch;
    if (captures) {
      p.captures = captures->data();
      p.n_captures = captures->size();
    }
    p.filter = filter;
    if (filter_captures) {
      p.filter_captures = filter_captures->data();
      p.n_filter_captures = filter_captures->size();
    }
    return p;
  }
  std::string str() const {
    return "k " + std::to_string(k) + ", n_probes " + std::to_string(probes) +
           (max_batch ? ", max_batch " + std::to_string(max_batch) : "") + (filter ? std::string(", filter ") + filter : "");
  }
};

// `queries` (host or device, `rows` of them) into poisoned host outputs.
udf_status run_search(udf_index* ix, const udf_tensor& queries, const Search& s, Result& r) {
  const int64_t rows = queries.rows;
  r.dist.assign(size_t(rows) * s.k, std::numeric_limits<float>::quiet_NaN());
  r.ids.assign(size_t(rows) * s.k, static_cast<int64_t>(0x5A5A5A5A5A5A5A5A));
  const udf_search_params p = s.params();
  udf_tensor od = udf::tensor(r.dist.data(), UDF_DTYPE_F32, rows, s.k);
  udf_tensor oi = udf::tensor(r.ids.data(), UDF_DTYPE_I64, rows, s.k);
  return udf_index_search(ix, &queries, &p, &od, &oi);
}
udf_status run_search(udf_index* ix, const Data& q, const Search& s, Result& r) {
  const udf_tensor t = q.tensor();
  return run_search(ix, t, s, r);
}

// Ids equal, distances equal bit for bit; else the first difference and how many.
::testing::AssertionResult same_results(const Result& want, const Result& got, uint32_t k) {
  if (want.ids.size() != got.ids.size() || want.dist.size() != got.dist.size())
    return ::testing::AssertionFailure() << "result sizes differ";
  size_t first = want.ids.size(), n_diff = 0;
  for (size_t i = 0; i < want.ids.size(); ++i) {
    if (want.ids[i] != got.ids[i] || std::memcmp(&want.dist[i], &got.dist[i], 4) != 0) {
      if (first == want.ids.size()) first = i;
      ++n_diff;
    }
  }
  if (n_diff == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << n_diff << " of " << want.ids.size() << " results differ; first at query "
                                       << first / k << " rank " << first % k << ": one GPU (" << fmt_float(want.dist[first])
                                       << ", id " << want.ids[first] << "), sharded (" << fmt_float(got.dist[first])
                                       << ", id " << got.ids[first] << ")";
}

// `got` answers queries q as `want` does, bit for bit, at each n_probes of
// `probes` (k 10).
void expect_same_search(udf_index* want, udf_index* got, const Data& q, std::initializer_list<uint32_t> probes) {
  for (uint32_t n_probes : probes) {
    Search s;
    s.probes = n_probes;
    SCOPED_TRACE(s.str());
    Result a, b;
    ASSERT_EQ(run_search(want, q, s, a), UDF_OK) << udf_last_error();
    ASSERT_EQ(run_search(got, q, s, b), UDF_OK) << udf_last_error();
    ASSERT_TRUE(same_results(a, b, s.k));
  }
}

// Rows whose k-th distance equals the (k-1)-th (a tie at the k-th place).
int64_t ties_at_k(const Result& r, uint32_t k) {
  if (k < 2) return 0;
  int64_t n = 0;
  for (size_t row = 0; row < r.ids.size() / k; ++row)
    if (r.ids[row * k + k - 1] >= 0 && r.dist[row * k + k - 1] == r.dist[row * k + k - 2]) ++n;
  return n;
}

// `got` holds `want`'s lists: the same info and list sizes.
void expect_same_lists(const udf_index* want, const udf_index* got) {
  udf_index_info a{}, b{};
  ASSERT_EQ(udf_index_info_get(want, &a), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_index_info_get(got, &b), UDF_OK) << udf_last_error();
  EXPECT_STREQ(a.metric, b.metric);
  EXPECT_EQ(a.elem, b.elem);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.max_list_size, b.max_list_size);
  EXPECT_EQ(a.size, b.size);
  ASSERT_EQ(a.n_lists, b.n_lists);
  std::vector<uint32_t> sa(a.n_lists), sb(b.n_lists);
  ASSERT_EQ(udf_index_list_sizes(want, sa.data(), sa.size()), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_index_list_sizes(got, sb.data(), sb.size()), UDF_OK) << udf_last_error();
  const auto at = std::mismatch(sa.begin(), sa.end(), sb.begin());
  ASSERT_TRUE(at.first == sa.end()) << "the lists differ: list " << (at.first - sa.begin()) << " holds " << *at.first
                                    << " vectors on one GPU, " << *at.second << " sharded";
}

// The shards of `ix`: one per device, in order, with the devices given,
// each reporting `layout` (0: do not check).  By lists: contiguous list
// ranges covering [0, n_lists), sizes the sums of their lists' sizes,
// balanced (the largest shard at most the mean plus the largest list:
// runtime.h cuts the ranges so when it builds or loads; adds keep them, so
// after adds `balanced` is false).  By vectors: every shard's range is every
// list, balanced (each list cut into equal parts: the mean plus at most a
// vector a list; adds give new rows to the shortest parts, so they stay
// within a vector a list too).  Either way the sizes add up to the index
// size, and the transport is the one runtime.h prescribes.
void expect_shards(const udf_index* ix, const std::vector<int32_t>& devices, bool balanced = true, uint32_t layout = 0) {
  size_t n = 0;
  ASSERT_EQ(udf_index_shard_count(ix, &n), UDF_OK) << udf_last_error();
  ASSERT_EQ(n, devices.size());
  udf_index_info info{};
  ASSERT_EQ(udf_index_info_get(ix, &info), UDF_OK) << udf_last_error();
  std::vector<uint32_t> sizes(info.n_lists);
  ASSERT_EQ(udf_index_list_sizes(ix, sizes.data(), sizes.size()), UDF_OK) << udf_last_error();
  const uint32_t largest_list = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  uint32_t next = 0, seen_layout = 0;
  int64_t total = 0, largest_shard = 0;
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE("shard " + std::to_string(i));
    udf_shard_info s{};
    s.size = -7;
    s.layout = 77;
    ASSERT_EQ(udf_index_shard_info(ix, i, &s), UDF_OK) << udf_last_error();
    EXPECT_EQ(s.device, devices[i]);
    ASSERT_TRUE(s.layout == UDF_SHARD_BY_LISTS || s.layout == UDF_SHARD_BY_VECTORS) << s.layout;
    if (i == 0) seen_layout = s.layout;
    EXPECT_EQ(s.layout, seen_layout) << "the shards report different layouts";
    if (layout != 0) {
      EXPECT_EQ(s.layout, n == 1 ? uint32_t(UDF_SHARD_BY_LISTS) : layout);
    }
    if (s.layout == UDF_SHARD_BY_VECTORS) {
      EXPECT_EQ(s.list_begin, 0u);
      EXPECT_EQ(s.list_end, info.n_lists);
      next = info.n_lists;
    } else {
      EXPECT_EQ(s.list_begin, next);
      ASSERT_LE(s.list_begin, s.list_end);
      ASSERT_LE(s.list_end, info.n_lists);
      const int64_t in_range =
          std::accumulate(sizes.begin() + s.list_begin, sizes.begin() + s.list_end, int64_t{0});
      EXPECT_EQ(s.size, in_range) << "lists [" << s.list_begin << ", " << s.list_end << ")";
      next = s.list_end;
    }
    total += s.size;
    largest_shard = std::max(largest_shard, s.size);
  }
  EXPECT_EQ(next, info.n_lists) << "the shards' lists end before the index's";
  EXPECT_EQ(total, info.size);
  if (seen_layout == UDF_SHARD_BY_VECTORS && n > 1) {
    EXPECT_LE(static_cast<double>(largest_shard), static_cast<double>(info.size) / double(n) + info.n_lists)
        << "unbalanced shards by vectors: largest " << largest_shard << " of " << info.size << " vectors over " << n
        << " shards, " << info.n_lists << " lists";
  } else if (balanced) {
    EXPECT_LE(static_cast<double>(largest_shard), static_cast<double>(info.size) / double(n) + largest_list)
        << "unbalanced shards: largest " << largest_shard << " of " << info.size << " vectors over " << n
        << " shards, largest list " << largest_list;
  }
  udf_shard_info past{};
  EXPECT_EQ(udf_index_shard_info(ix, n, &past), UDF_ERROR_INVALID_ARGUMENT) << "shard " << n << " of " << n;
  const char* t = udf_index_shard_transport(ix);
  ASSERT_NE(t, nullptr);
  std::string why;
  const std::string want = expected_transport(devices, &why);
  EXPECT_EQ(std::string(t), want) << "(" << why << ")";
}
void expect_shards(const udf_index* ix, const Layout& l, bool balanced = true) {
  expect_shards(ix, l.devices, balanced, l.shard_layout);
}

// ------------------------------------------------------------------ one GPU against shards, every metric

struct MetricCase {
  const char* name;   // the test's name
  const char* file;   // the module, in module_dir()
  const char* metric;
  udf_dtype dtype;
  bool weights;       // binds weighted_l2's array capture "weights"
  bool filters;       // also searched through filters.udfm's bitmap and per-query filter
};

const std::vector<MetricCase>& metric_cases() {
  static const std::vector<MetricCase> v = {
      {"builtin_l2", "builtin.udfm", "udf_builtin_l2", UDF_DTYPE_F32, false, false},
      {"builtin_inner_product", "builtin.udfm", "udf_builtin_inner_product", UDF_DTYPE_F32, false, false},
      {"weighted_l2", "udfs.udfm", "weighted_l2", UDF_DTYPE_F32, true, false},
      {"int8_l2", "udfs.udfm", "int8_l2", UDF_DTYPE_I8, false, false},
      {"f16_l2", "udfs.udfm", "f16_l2", UDF_DTYPE_F16, false, false},
      {"prune_weighted_l2", "prune.udfm", "weighted_l2", UDF_DTYPE_F32, true, false},
      {"filters_l2", "filters.udfm", "udf_builtin_l2", UDF_DTYPE_F32, false, true},
  };
  return v;
}

class ShardedSearch : public ::testing::TestWithParam<int> {};

// Each metric over clustered data (24000 x 48, 96 lists; the queries: 1500
// stored rows, exact hits and copies, and 1500 fresh points) and a grid of
// values 0..3 (12000 x 32, 48 lists: ties at the k-th place, which the test
// checks happen): one index with udf_index_build on modules[0], one with
// udf_index_build_sharded for each layout, same data and seed.  Every
// search (batches 1, 100, 3000 and 3000 in chunks of 700; k 10, 100;
// n_probes 1, 8, 32; each filter) gives the one-GPU index's ids and
// distances, bit for bit.
TEST_P(ShardedSearch, MatchesOneGpuBitForBit) {
  REQUIRE_GPU();
  const auto t0 = Clock::now();
  const MetricCase& c = metric_cases()[GetParam()];
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, c.file);
  udf_module* home = mods[0][0];
  const std::vector<uint32_t> ks = ks_for(home, c.metric);
  const uint64_t seed = fresh_seed();
  std::printf("[   INFO   ] %s: seed %" PRIu64 "\n", c.name, seed);
  std::mt19937_64 rng(seed);
  int64_t searches = 0;
  for (const bool tied : {false, true}) {
    const int64_t dim = tied ? 32 : 48, rows = tied ? 12000 : 24000;
    const uint32_t n_lists = tied ? 48 : 96;
    SCOPED_TRACE(std::string(c.name) + (tied ? ", grid data" : ", clustered data"));
    const std::vector<double> centers = centers_for(rng, 40, dim);
    const Data base = tied ? grid(rng, c.dtype, rows, dim) : clustered(rng, c.dtype, rows, dim, centers);
    const Data fresh = tied ? grid(rng, c.dtype, 1500, dim) : clustered(rng, c.dtype, 1500, dim, centers);
    const Data q = concat(base.rows_of(rows / 3, 1500), fresh);
    std::vector<float> w = weights_for(rng, dim);
    udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
    std::vector<udf_capture_binding> caps;
    if (c.weights) caps.push_back({"weights", &wt, 0, 0});
    // Filters: a bitmap keeping about 3% of the ids (fewer than k in many
    // probed lists: padding), and a per-query one (id % 5 == query row % 5).
    std::vector<uint8_t> bitmap((rows + 7) / 8, 0);
    std::bernoulli_distribution take(0.03);
    for (int64_t i = 0; i < rows; ++i)
      if (take(rng)) bitmap[i / 8] |= uint8_t(1u << (i % 8));
    udf_tensor bt = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bitmap.size()));
    const std::vector<udf_capture_binding> bitmap_caps = {{"bitmap", &bt, 0, 0},
                                                          {"n_ids", nullptr, 0, static_cast<int32_t>(rows)}};
    const std::vector<udf_capture_binding> group_caps = {{"n_groups", nullptr, 0, 5}};
    struct FilterUse {
      const char* name;
      const std::vector<udf_capture_binding>* caps;
    };
    std::vector<FilterUse> filters = {{nullptr, nullptr}};
    if (c.filters) {
      filters.push_back({"udf_builtin_bitmap", &bitmap_caps});
      filters.push_back({"query_group", &group_caps});
    }

    const udf_index_params p = index_params(n_lists, seed);
    Index one = build_one(home, c.metric, base, p);
    ASSERT_TRUE(one);
    expect_shards(one.get(), std::vector<int32_t>{0});
    std::vector<Index> sharded;
    for (size_t li = 0; li < lay.size(); ++li) {
      SCOPED_TRACE("devices " + lay[li].name);
      sharded.push_back(build_sharded(mods[li], c.metric, base, p, lay[li].shard_layout));
      ASSERT_TRUE(sharded.back());
      expect_same_lists(one.get(), sharded.back().get());
      expect_shards(sharded.back().get(), lay[li]);
      if (HasFatalFailure()) return;
    }

    std::vector<std::pair<int64_t, Search>> plan;  // (batch, search)
    for (int64_t batch : {int64_t(1), int64_t(100), int64_t(3000)})
      for (uint32_t k : ks)
        for (uint32_t probes : {1u, 8u, 32u}) {
          Search s;
          s.k = k;
          s.probes = probes;
          plan.push_back({batch, s});
        }
    Search chunked;
    chunked.k = ks.back();
    chunked.probes = 8;
    chunked.max_batch = 700;
    plan.push_back({3000, chunked});

    int64_t tie_rows = 0;
    for (const FilterUse& f : filters) {
      for (auto [batch, s] : plan) {
        s.captures = &caps;
        s.filter = f.name;
        s.filter_captures = f.caps;
        // Batch 1: a stored row; 100: stored rows then fresh ones; 3000: all.
        const Data qq = batch == 1 ? q.rows_of(0, 1) : batch == 100 ? q.rows_of(1450, 100) : q;
        SCOPED_TRACE(std::to_string(batch) + " queries, " + s.str());
        Result want;
        ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
        tie_rows += ties_at_k(want, s.k);
        for (size_t li = 0; li < lay.size(); ++li) {
          Result got;
          ASSERT_EQ(run_search(sharded[li].get(), qq, s, got), UDF_OK) << lay[li].name << ": " << udf_last_error();
          ASSERT_TRUE(same_results(want, got, s.k)) << "devices " << lay[li].name;
          ++searches;
        }
      }
    }
    if (tied) {
      EXPECT_GT(tie_rows, 0) << "the grid data should tie at the k-th place";
    }
    udf_search_stats st{};
    EXPECT_EQ(udf_index_last_search_stats(sharded[0].get(), &st), UDF_OK) << udf_last_error();
    EXPECT_GE(st.chunks, 1u);
  }
  std::printf("[   INFO   ] %s: %" PRId64 " sharded searches equal to one GPU's over %zu layouts, %.1f s\n", c.name,
              searches, lay.size(), seconds_since(t0));
}
INSTANTIATE_TEST_SUITE_P(Metrics, ShardedSearch, ::testing::Range(0, static_cast<int>(metric_cases().size())),
                         [](const auto& i) { return std::string(metric_cases()[i.param].name); });

// The set-up every Shards test shares: a GPU (else the test is skipped) and
// random data from a fresh seed, printed.
struct Shards : ::testing::Test {
  uint64_t seed = 0;
  std::mt19937_64 rng;
  void SetUp() override {
    REQUIRE_GPU();
    seed = fresh_seed();
    std::printf("[   INFO   ] seed %" PRIu64 "\n", seed);
    rng.seed(seed);
  }
};

// Few lists over the shards: 120 vectors in 3 lists (at most 80 each under
// the balance cap), so each shard of {0,0,0} and one of {0,0} holds fewer
// than k = 100 vectors, and with n_probes 1 or 2 the probed lists hold
// fewer than k (padding rows: id -1 and +inf, or -inf for the max-ordered
// inner product); and an unbalanced build (balance 0) of 3 clusters over 8
// lists.  Grid data: ties too.  The sharded results are the one-GPU ones.
TEST_F(Shards, FewVectorsPerShardAndPadding) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "builtin.udfm");
  udf_module* home = mods[0][0];
  if (metric_info(home, "udf_builtin_l2").max_k < 120) GTEST_SKIP() << "the module links k <= 32 only";
  struct Case {
    int64_t rows;
    uint32_t n_lists;
    double balance;
  };
  const int64_t dim = 16;
  for (const char* metric : {"udf_builtin_l2", "udf_builtin_inner_product"}) {
    const bool max_order = std::string(metric) == "udf_builtin_inner_product";
    const float worst = max_order ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    for (const Case& c : {Case{120, 3, 2.0}, Case{400, 8, 0.0}}) {
      SCOPED_TRACE(std::string(metric) + ", " + std::to_string(c.rows) + " vectors in " + std::to_string(c.n_lists) +
                   " lists, balance " + std::to_string(c.balance));
      const Data base = c.balance > 0 ? grid(rng, UDF_DTYPE_F32, c.rows, dim)
                                      : clustered(rng, UDF_DTYPE_F32, c.rows, dim, centers_for(rng, 3, dim));
      const Data q = concat(base.rows_of(0, 20), grid(rng, UDF_DTYPE_F32, 30, dim));
      const udf_index_params p = index_params(c.n_lists, seed, c.balance);
      Index one = build_one(home, metric, base, p);
      ASSERT_TRUE(one);
      udf_index_info info{};
      ASSERT_EQ(udf_index_info_get(one.get(), &info), UDF_OK);
      if (c.balance > 0) {
        ASSERT_LT(info.max_list_size, 100u) << "every list should hold fewer than k vectors";
      }
      for (size_t li = 0; li < lay.size(); ++li) {
        SCOPED_TRACE("devices " + lay[li].name);
        Index sh = build_sharded(mods[li], metric, base, p, lay[li].shard_layout);
        ASSERT_TRUE(sh);
        expect_same_lists(one.get(), sh.get());
        expect_shards(sh.get(), lay[li]);
        if (HasFatalFailure()) return;
        if (c.balance > 0) {
          int64_t smallest = std::numeric_limits<int64_t>::max();
          for (size_t i = 0; i < lay[li].devices.size(); ++i) {
            udf_shard_info s{};
            ASSERT_EQ(udf_index_shard_info(sh.get(), i, &s), UDF_OK);
            smallest = std::min(smallest, s.size);
          }
          EXPECT_LT(smallest, 100) << "some shard should hold fewer than k vectors";
        }
        for (uint32_t k : {100u, 120u}) {
          for (uint32_t probes : {1u, 2u, c.n_lists}) {
            for (const Data& qq : {q.rows_of(0, 1), q.rows_of(25, 1), q}) {
              Search s;
              s.k = k;
              s.probes = probes;
              SCOPED_TRACE(std::to_string(qq.rows) + " queries, " + s.str());
              Result want, got;
              ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
              ASSERT_EQ(run_search(sh.get(), qq, s, got), UDF_OK) << udf_last_error();
              ASSERT_TRUE(same_results(want, got, k));
              // The reference pads as runtime.h says: with one probed list
              // of the first case, past its vectors; with every list, past
              // the index's.
              int64_t padding = 0;
              for (size_t i = 0; i < want.ids.size(); ++i) {
                if (want.ids[i] != -1) continue;
                ++padding;
                EXPECT_EQ(std::memcmp(&want.dist[i], &worst, 4), 0) << "padding distance " << want.dist[i];
              }
              if (c.balance > 0 && probes == 1) {
                EXPECT_GT(padding, 0) << "one list of fewer than k vectors probed: padding expected";
              }
              if (probes == c.n_lists) {
                EXPECT_EQ(padding, qq.rows * int64_t(k - std::min<int64_t>(k, c.rows)));
              }
            }
          }
        }
      }
    }
  }
}

// ------------------------------------------------------------------ shard info and transport

// A one-GPU index is one shard with everything, transport "none"; a
// sharded one reports its shards (expect_shards) over unequal lists (no
// balance cap, clusters of different sizes); bad arguments are refused.
TEST_F(Shards, ShardInfoOfOneGpuAndShardedIndexes) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "udfs.udfm");
  const int64_t dim = 24;
  // Unequal lists: no balance cap; clustered rows and a block of grid rows near the origin.
  Data base = clustered(rng, UDF_DTYPE_I8, 9000, dim, centers_for(rng, 6, dim));
  base = concat(base, grid(rng, UDF_DTYPE_I8, 1000, dim));
  const udf_index_params p = index_params(37, seed, 0.0);
  Index one = build_one(mods[0][0], "int8_l2", base, p);
  ASSERT_TRUE(one);
  udf_index_info info{};
  ASSERT_EQ(udf_index_info_get(one.get(), &info), UDF_OK);
  size_t n = 0;
  ASSERT_EQ(udf_index_shard_count(one.get(), &n), UDF_OK) << udf_last_error();
  EXPECT_EQ(n, 1u);
  udf_shard_info s{};
  ASSERT_EQ(udf_index_shard_info(one.get(), 0, &s), UDF_OK) << udf_last_error();
  EXPECT_EQ(s.device, 0);
  EXPECT_EQ(s.list_begin, 0u);
  EXPECT_EQ(s.list_end, 37u);
  EXPECT_EQ(s.size, base.rows);
  EXPECT_EQ(s.size, info.size);
  ASSERT_NE(udf_index_shard_transport(one.get()), nullptr);
  EXPECT_STREQ(udf_index_shard_transport(one.get()), "none");
  EXPECT_EQ(udf_index_shard_info(one.get(), 1, &s), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_shard_count(nullptr, &n), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_shard_count(one.get(), nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_shard_info(nullptr, 0, &s), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_shard_info(one.get(), 0, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  for (size_t li = 0; li < lay.size(); ++li) {
    SCOPED_TRACE("devices " + lay[li].name);
    Index sh = build_sharded(mods[li], "int8_l2", base, p, lay[li].shard_layout);
    ASSERT_TRUE(sh);
    expect_same_lists(one.get(), sh.get());
    expect_shards(sh.get(), lay[li]);
    std::string why;
    const std::string t = expected_transport(lay[li].devices, &why);
    std::printf("[   INFO   ] devices %s: transport %s (%s)\n", lay[li].name.c_str(), udf_index_shard_transport(sh.get()),
                why.c_str());
    if (lay[li].devices[0] == lay[li].devices[1]) {
      EXPECT_STREQ(udf_index_shard_transport(sh.get()), "peer");
    }
  }
  // One module (one shard: everything, "none"), and one runtime's module
  // listed twice (a device appearing twice through the same runtime): the
  // one-GPU results.
  const Data q = concat(base.rows_of(0, 50), grid(rng, UDF_DTYPE_I8, 150, dim));
  const std::vector<std::pair<std::string, std::vector<udf_module*>>> more = {
      {"{0}", {mods[0][0]}}, {"{0,0} through one runtime", {mods[0][0], mods[0][0]}}};
  for (const auto& [name, ms] : more) {
    SCOPED_TRACE("devices " + name);
    Index sh = build_sharded(ms, "int8_l2", base, p, UDF_SHARD_DEFAULT);
    ASSERT_TRUE(sh);
    expect_same_lists(one.get(), sh.get());
    expect_shards(sh.get(), std::vector<int32_t>(ms.size(), 0));
    for (uint32_t probes : {1u, 5u, 37u})
      for (const Data& qq : {q.rows_of(0, 1), q}) {
        Search s;
        s.k = 10;
        s.probes = probes;
        SCOPED_TRACE(std::to_string(qq.rows) + " queries, " + s.str());
        Result want, got;
        ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
        ASSERT_EQ(run_search(sh.get(), qq, s, got), UDF_OK) << udf_last_error();
        ASSERT_TRUE(same_results(want, got, s.k));
      }
  }
}

// {0,1}: the shards' top-k reach device 0 through NCCL when libnccl.so.2
// loads, else by peer copies; UDF_NCCL=0 forces peer copies.  Both give the
// one-GPU results.
TEST_F(Shards, TwoGpusTransport) {
  Pool& pl = pool();
  if (!pl.one) GTEST_SKIP() << pl.no_one;
  LOAD_MODULES(mods, (std::vector<udf_runtime*>{pl.zero[0], pl.one}), "builtin.udfm");
  const int64_t dim = 40;
  const std::vector<double> centers = centers_for(rng, 30, dim);
  const Data base = clustered(rng, UDF_DTYPE_F32, 20000, dim, centers);
  const Data q = concat(base.rows_of(0, 500), clustered(rng, UDF_DTYPE_F32, 1500, dim, centers));
  const udf_index_params p = index_params(64, seed);
  Index one = build_one(mods.m[0], "udf_builtin_l2", base, p);
  ASSERT_TRUE(one);
  const std::vector<uint32_t> ks = ks_for(mods.m[0], "udf_builtin_l2");
  for (const char* nccl_env : {"", "0"}) for (const uint32_t layout : {UDF_SHARD_BY_LISTS, UDF_SHARD_BY_VECTORS}) {
    std::optional<ScopedEnv> env;
    if (*nccl_env) env.emplace("UDF_NCCL", nccl_env);
    SCOPED_TRACE(std::string("UDF_NCCL=") + nccl_env + (layout == UDF_SHARD_BY_LISTS ? ", by lists" : ", by vectors"));
    Index sh = build_sharded(mods.m, "udf_builtin_l2", base, p, layout);
    ASSERT_TRUE(sh);
    std::string why;
    const std::string want_t = expected_transport({0, 1}, &why);
    const char* t = udf_index_shard_transport(sh.get());
    ASSERT_NE(t, nullptr);
    std::printf("[   INFO   ] devices {0,1}%s: transport %s (%s)\n", *nccl_env ? ", UDF_NCCL=0" : "", t, why.c_str());
    EXPECT_EQ(std::string(t), want_t) << why;
    if (*nccl_env) {
      EXPECT_STREQ(t, "peer");
    }
    expect_same_lists(one.get(), sh.get());
    expect_shards(sh.get(), {0, 1}, true, layout);
    for (uint32_t k : ks)
      for (uint32_t probes : {1u, 16u})
        for (const Data& qq : {q.rows_of(0, 1), q}) {
          Search s;
          s.k = k;
          s.probes = probes;
          SCOPED_TRACE(std::to_string(qq.rows) + " queries, " + s.str());
          Result want, got;
          ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
          ASSERT_EQ(run_search(sh.get(), qq, s, got), UDF_OK) << udf_last_error();
          ASSERT_TRUE(same_results(want, got, k));
        }
  }
}

// ------------------------------------------------------------------ save, load, add

// A sharded index's file is the one-GPU index's file (same bytes: the same
// lists in the one-GPU format).  It loads on one GPU (udf_index_load: one
// shard, "none") and sharded on every layout, and so does the one-GPU
// index's file; all search as the one-GPU index.
TEST_F(Shards, SaveAndLoadOnOneOrSeveralGpus) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "udfs.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "f16_l2";
  const std::vector<uint32_t> ks = ks_for(home, metric);
  const int64_t dim = 40;
  const std::vector<double> centers = centers_for(rng, 30, dim);
  const Data base = clustered(rng, UDF_DTYPE_F16, 16000, dim, centers);
  const Data q = concat(base.rows_of(100, 300), clustered(rng, UDF_DTYPE_F16, 700, dim, centers));
  const udf_index_params p = index_params(64, seed);
  Index one = build_one(home, metric, base, p);
  ASSERT_TRUE(one);
  Index sh = build_sharded(mods[1], metric, base, p, lay[1].shard_layout);  // {0,0,0} by vectors
  ASSERT_TRUE(sh);
  const std::string dir = ::testing::TempDir();
  const std::string path_one = dir + "shards_test_one.udfi", path_sh = dir + "shards_test_sharded.udfi";
  ASSERT_EQ(udf_index_save(one.get(), path_one.c_str()), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_index_save(sh.get(), path_sh.c_str()), UDF_OK) << udf_last_error();
  const std::vector<uint8_t> bytes_one = read_bytes(path_one), bytes_sh = read_bytes(path_sh);
  EXPECT_GT(bytes_sh.size(), 0u);
  EXPECT_TRUE(bytes_one == bytes_sh) << "the sharded index's file (" << bytes_sh.size()
                                     << " bytes) is not the one-GPU index's file (" << bytes_one.size() << " bytes)";
  std::vector<Search> plan;
  for (uint32_t k : ks)
    for (uint32_t probes : {4u, 64u}) {
      Search s;
      s.k = k;
      s.probes = probes;
      plan.push_back(s);
    }
  std::vector<std::pair<Data, std::vector<Result>>> want;  // per query set, per plan entry
  for (const Data& qq : {q.rows_of(0, 1), q}) {
    std::vector<Result> rs(plan.size());
    for (size_t i = 0; i < plan.size(); ++i) ASSERT_EQ(run_search(one.get(), qq, plan[i], rs[i]), UDF_OK) << udf_last_error();
    want.push_back({qq, std::move(rs)});
  }
  auto expect_same_search = [&](udf_index* ix, const std::string& what) {
    for (const auto& [qq, rs] : want)
      for (size_t i = 0; i < plan.size(); ++i) {
        SCOPED_TRACE(what + ", " + std::to_string(qq.rows) + " queries, " + plan[i].str());
        Result got;
        ASSERT_EQ(run_search(ix, qq, plan[i], got), UDF_OK) << udf_last_error();
        ASSERT_TRUE(same_results(rs[i], got, plan[i].k));
      }
  };
  expect_same_search(sh.get(), "built sharded " + lay[1].name);
  // The sharded index's file on one GPU.
  udf_index* raw = nullptr;
  ASSERT_EQ(udf_index_load(home, path_sh.c_str(), &raw), UDF_OK) << udf_last_error();
  Index loaded_one(raw);
  expect_same_lists(one.get(), loaded_one.get());
  expect_shards(loaded_one.get(), std::vector<int32_t>{0});
  EXPECT_STREQ(udf_index_shard_transport(loaded_one.get()), "none");
  expect_same_search(loaded_one.get(), "the sharded file on one GPU");
  // Both files on every layout.
  for (size_t li = 0; li < lay.size(); ++li) {
    for (const std::string& path : {path_sh, path_one}) {
      const std::string what = (path == path_sh ? "the sharded file on " : "the one-GPU file on ") + lay[li].name;
      SCOPED_TRACE(what);
      Index ls = load_sharded(mods[li], path, lay[li].shard_layout);
      ASSERT_TRUE(ls);
      expect_same_lists(one.get(), ls.get());
      expect_shards(ls.get(), lay[li]);
      expect_same_search(ls.get(), what);
      if (HasFatalFailure()) return;
    }
  }
  // A loaded sharded index saves the same file again.
  Index again = load_sharded(mods[0], path_one, UDF_SHARD_BY_LISTS);
  ASSERT_TRUE(again);
  const std::string path_again = dir + "shards_test_again.udfi";
  ASSERT_EQ(udf_index_save(again.get(), path_again.c_str()), UDF_OK) << udf_last_error();
  EXPECT_TRUE(read_bytes(path_again) == bytes_one) << "a loaded sharded index saved another file";
  std::remove(path_one.c_str());
  std::remove(path_sh.c_str());
  std::remove(path_again.c_str());
}

// udf_index_add on the sharded indexes and on the one-GPU index, step by
// step: host rows with default ids, host rows with explicit (sparse) ids,
// rows in device memory on the first device with default ids (continuing
// after the largest explicit id).  After each step: the same lists, valid
// shards, the same results.  A refused add leaves a sharded index unchanged.
TEST_F(Shards, AddGivesTheOneGpuResults) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "builtin.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "udf_builtin_l2";
  const std::vector<uint32_t> ks = ks_for(home, metric);
  const int64_t dim = 36;
  const uint32_t n_lists = 48;
  const std::vector<double> centers = centers_for(rng, 24, dim);
  const Data base = clustered(rng, UDF_DTYPE_F32, 12000, dim, centers);
  const Data b = clustered(rng, UDF_DTYPE_F32, 4000, dim, centers);
  const Data c = clustered(rng, UDF_DTYPE_F32, 3000, dim, centers);
  const Data d = clustered(rng, UDF_DTYPE_F32, 2000, dim, centers);
  const Data q = concat(concat(b.rows_of(0, 100), c.rows_of(0, 100)),
                        concat(d.rows_of(0, 100), clustered(rng, UDF_DTYPE_F32, 700, dim, centers)));
  const udf_index_params p = index_params(n_lists, seed);
  Index one = build_one(home, metric, base, p);
  ASSERT_TRUE(one);
  std::vector<Index> sharded;
  for (size_t li = 0; li < lay.size(); ++li) {
    sharded.push_back(build_sharded(mods[li], metric, base, p, lay[li].shard_layout));
    ASSERT_TRUE(sharded.back()) << lay[li].name;
  }
  std::vector<int64_t> c_ids(c.rows);
  for (int64_t i = 0; i < c.rows; ++i) c_ids[i] = 5000000 + 7 * i;
  const udf_tensor c_ids_t = udf::tensor(c_ids.data(), UDF_DTYPE_I64, c.rows, 1);
  DevMem d_dev(d.bytes.data(), d.bytes.size());
  const udf_tensor d_t = udf::tensor(d_dev.ptr(), UDF_DTYPE_F32, d.rows, dim, 0);
  struct Step {
    const char* what;
    udf_tensor data;
    const udf_tensor* ids;
  };
  const std::vector<Step> steps = {{"host rows, default ids", b.tensor(), nullptr},
                                   {"host rows, explicit ids", c.tensor(), &c_ids_t},
                                   {"device rows, default ids", d_t, nullptr}};
  for (const Step& st : steps) {
    SCOPED_TRACE(st.what);
    ASSERT_EQ(udf_index_add(one.get(), &st.data, st.ids), UDF_OK) << udf_last_error();
    for (size_t li = 0; li < lay.size(); ++li) {
      SCOPED_TRACE("devices " + lay[li].name);
      ASSERT_EQ(udf_index_add(sharded[li].get(), &st.data, st.ids), UDF_OK) << udf_last_error();
      expect_same_lists(one.get(), sharded[li].get());
      expect_shards(sharded[li].get(), lay[li], false);
      if (HasFatalFailure()) return;
      for (uint32_t k : ks)
        for (uint32_t probes : {8u, n_lists})
          for (const Data& qq : {q.rows_of(0, 1), q.rows_of(100, 1), q}) {
            Search s;
            s.k = k;
            s.probes = probes;
            SCOPED_TRACE(std::to_string(qq.rows) + " queries, " + s.str());
            Result want, got;
            ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
            ASSERT_EQ(run_search(sharded[li].get(), qq, s, got), UDF_OK) << udf_last_error();
            ASSERT_TRUE(same_results(want, got, k));
          }
    }
  }
  // After the adds each sharded index still saves the one-GPU index's file
  // (by vectors: every list's parts put back at their positions).
  {
    const std::string dir = ::testing::TempDir();
    const std::string path_one = dir + "shards_add_one.udfi", path_sh = dir + "shards_add_sharded.udfi";
    ASSERT_EQ(udf_index_save(one.get(), path_one.c_str()), UDF_OK) << udf_last_error();
    const std::vector<uint8_t> bytes_one = read_bytes(path_one);
    for (size_t li = 0; li < lay.size(); ++li) {
      ASSERT_EQ(udf_index_save(sharded[li].get(), path_sh.c_str()), UDF_OK) << udf_last_error();
      EXPECT_TRUE(read_bytes(path_sh) == bytes_one) << lay[li].name << ": after the adds, the file differs from the one-GPU index's";
    }
    std::remove(path_one.c_str());
    std::remove(path_sh.c_str());
  }
  // The explicit ids are there: c's rows find themselves (or an equal copy) at distance 0.
  {
    Search s;
    s.k = 1;
    s.probes = n_lists;
    Result r;
    ASSERT_EQ(run_search(sharded[0].get(), c.rows_of(0, 50), s, r), UDF_OK) << udf_last_error();
    int64_t explicit_ids = 0;
    for (int64_t id : r.ids) explicit_ids += id >= 5000000 && (id - 5000000) % 7 == 0;
    EXPECT_GT(explicit_ids, 25) << "c's explicit ids should come back for most of its rows";
  }
  // Refused adds leave the index as it was.
  udf_index_info before{}, after{};
  ASSERT_EQ(udf_index_info_get(sharded[0].get(), &before), UDF_OK);
  const Data wrong = make_data(rng, UDF_DTYPE_U8, 10, dim);
  const udf_tensor wrong_t = wrong.tensor();
  EXPECT_EQ(udf_index_add(sharded[0].get(), &wrong_t, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  const udf_tensor b_t = b.tensor();
  const udf_tensor short_ids = udf::tensor(c_ids.data(), UDF_DTYPE_I64, 10, 1);
  EXPECT_EQ(udf_index_add(sharded[0].get(), &b_t, &short_ids), UDF_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(udf_index_info_get(sharded[0].get(), &after), UDF_OK);
  EXPECT_EQ(after.size, before.size);
  expect_same_lists(one.get(), sharded[0].get());
}

// ------------------------------------------------------------------ given centroids

// The build's ways to the same lists: each shard's share of the rows staged
// on its device (host rows, pinned) or read in place (device rows of the
// first device, copied to the others), the k-means sample gathered from the
// shares or from the input, every device finding the nearest centres of its
// part of each segment's rows (the flat k-means: one segment; two levels:
// the mesoclusters', then each one's lists, then every list), the placement
// reading the shares where they are (a peer's memory), or staging them again
// from the input (restaged rows, no peer reads); with coarse weights, every
// way's scaled copies.  Every way gives the one-GPU index's lists and results.
TEST_F(Shards, BuildPathsGiveTheOneGpuLists) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "builtin.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "udf_builtin_l2";
  const int64_t dim = 40;
  const uint32_t n_lists = 48;
  const std::vector<double> centers = centers_for(rng, 24, dim);
  const Data data = clustered(rng, UDF_DTYPE_F32, 20011, dim, centers);  // shares of unequal sizes
  const Data q = clustered(rng, UDF_DTYPE_F32, 200, dim, centers);
  Cu::I().use();
  DevMem data_dev(data.bytes.data(), data.bytes.size());
  const udf_tensor on_host = data.tensor();
  const udf_tensor on_device = udf::tensor(data_dev.ptr(), UDF_DTYPE_F32, data.rows, dim, 0);
  struct Unset {
    ~Unset() { udf_testing_paths(0); }
  } unset;
  EXPECT_EQ(udf_testing_paths(kPathFirstUnknown), UDF_ERROR_INVALID_ARGUMENT) << "an unknown path bit";
  EXPECT_TRUE(contains_nocase(udf_last_error(), "unknown bits")) << udf_last_error();
  std::vector<float> weights(dim);  // coarse weights: k-means and the assignment over scaled copies
  std::uniform_real_distribution<float> u(0, 3);
  for (float& x : weights) x = u(rng);
  for (const auto& [meso, weighted] : {std::pair{0u, false}, std::pair{5u, false}, std::pair{0u, true}}) {
    udf_index_params p = index_params(n_lists, seed);
    p.kmeans_mesoclusters = meso;
    if (weighted) p.coarse_weights = weights.data();
    Index one = build_one(home, metric, data, p);
    ASSERT_TRUE(one);
    for (size_t li = 0; li < lay.size(); ++li) {
      for (const uint32_t path : {0u, kPathRestageRows, kPathNoPeerReads}) {
        for (const bool device_rows : {false, true}) {
          if (meso != 0 && path != 0) continue;  // the placement's paths do not depend on the k-means
          SCOPED_TRACE("devices " + lay[li].name + ", " + std::to_string(meso) + " mesoclusters, path " + std::to_string(path) +
                       (device_rows ? ", device rows" : ", host rows") + (weighted ? ", coarse weights" : ""));
          ASSERT_EQ(udf_testing_paths(path), UDF_OK) << udf_last_error();
          udf_index* raw = nullptr;
          udf_index_params ps = p;
          ps.shard_layout = lay[li].shard_layout;
          ASSERT_EQ(udf_index_build_sharded(mods[li].data(), mods[li].size(), metric, device_rows ? &on_device : &on_host,
                                            nullptr, &ps, &raw),
                    UDF_OK)
              << udf_last_error();
          Index sh(raw);
          ASSERT_EQ(udf_testing_paths(0), UDF_OK);
          expect_same_lists(one.get(), sh.get());
          expect_shards(sh.get(), lay[li]);
          if (HasFatalFailure()) return;
          expect_same_search(one.get(), sh.get(), q, {3u, n_lists});
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// udf_index_params.centroids replaces k-means: an index built over another
// index's centroids (udf_index_centroids) holds the same lists and searches
// the same, on one GPU and sharded; it needs only one row.  And what
// udf.dask builds on: indexes over parts of the rows that share centroids
// (plain nearest assignment) together hold the one index's lists, so the
// top-k of each part merged by distance is the one index's top-k (distances
// bit for bit; ids where the distance has no tie).
TEST_F(Shards, GivenCentroidsReplaceKmeans) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "builtin.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "udf_builtin_l2";
  const int64_t dim = 24;
  const uint32_t n_lists = 40;
  const std::vector<double> centers = centers_for(rng, 20, dim);
  const Data data = clustered(rng, UDF_DTYPE_F32, 9000, dim, centers);
  const Data q = clustered(rng, UDF_DTYPE_F32, 300, dim, centers);
  const udf_index_params p = index_params(n_lists, seed);
  Index one = build_one(home, metric, data, p);
  ASSERT_TRUE(one);
  std::vector<float> cen(size_t(n_lists) * dim);
  ASSERT_EQ(udf_index_centroids(one.get(), cen.data(), cen.size()), UDF_OK) << udf_last_error();
  EXPECT_EQ(udf_index_centroids(one.get(), cen.data(), cen.size() - 1), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains_nocase(udf_last_error(), "room")) << udf_last_error();
  udf_index_params given = index_params(n_lists, seed + 1, 2.0, 0);  // another seed, no iterations: not used
  given.centroids = cen.data();
  {
    Index two = build_one(home, metric, data, given);
    ASSERT_TRUE(two);
    expect_same_lists(one.get(), two.get());
    std::vector<float> back(cen.size());
    ASSERT_EQ(udf_index_centroids(two.get(), back.data(), back.size()), UDF_OK) << udf_last_error();
    EXPECT_EQ(std::memcmp(back.data(), cen.data(), cen.size() * 4), 0) << "the centroids given are the index's";
    expect_same_search(one.get(), two.get(), q, {4u, n_lists});
  }
  for (size_t li = 0; li < lay.size(); ++li) {
    SCOPED_TRACE("devices " + lay[li].name);
    Index sh = build_sharded(mods[li], metric, data, given, lay[li].shard_layout);
    ASSERT_TRUE(sh);
    expect_same_lists(one.get(), sh.get());
    expect_same_search(one.get(), sh.get(), q, {4u, n_lists});
  }
  // Fewer rows than lists: refused for k-means, taken with centroids.
  auto refused = [&](const Data& d, const udf_index_params& pp) {
    const udf_tensor t = d.tensor();
    udf_index* ix = nullptr;
    const udf_status st = udf_index_build(home, metric, &t, nullptr, &pp, &ix);
    udf_index_destroy(ix);
    return st == UDF_ERROR_INVALID_ARGUMENT && ix == nullptr;
  };
  const Data few = data.rows_of(0, 5);
  EXPECT_TRUE(refused(few, p));
  EXPECT_TRUE(contains_nocase(udf_last_error(), "n_lists")) << udf_last_error();
  {
    Index small = build_one(home, metric, few, given);
    ASSERT_TRUE(small);
    udf_index_info info{};
    ASSERT_EQ(udf_index_info_get(small.get(), &info), UDF_OK);
    EXPECT_EQ(info.size, 5);
  }
  // A centroid that is not finite is named.
  {
    std::vector<float> bad = cen;
    bad[size_t(7) * dim + 3] = std::numeric_limits<float>::quiet_NaN();
    udf_index_params pb = given;
    pb.centroids = bad.data();
    EXPECT_TRUE(refused(data, pb));
    EXPECT_TRUE(contains_nocase(udf_last_error(), "centroids") && contains_nocase(udf_last_error(), "list 7"))
        << udf_last_error();
  }
  // Parts sharing centroids: the one index's top-k.
  udf_index_params plain = given;
  plain.balance = 0;
  Index whole = build_one(home, metric, data, plain);
  ASSERT_TRUE(whole);
  const int64_t cut = 3500;
  std::vector<int64_t> tail_ids(data.rows - cut);
  std::iota(tail_ids.begin(), tail_ids.end(), cut);
  const Data head = data.rows_of(0, cut), tail = data.rows_of(cut, data.rows - cut);
  Index a = build_one(home, metric, head, plain);
  ASSERT_TRUE(a);
  udf_index* b_raw = nullptr;
  {
    const udf_tensor t = tail.tensor(), ids = udf::tensor(tail_ids.data(), UDF_DTYPE_I64, tail.rows, 1);
    ASSERT_EQ(udf_index_build(home, metric, &t, &ids, &plain, &b_raw), UDF_OK) << udf_last_error();
  }
  Index b(b_raw);
  for (uint32_t probes : {3u, n_lists}) {
    Search s;
    s.probes = probes;
    s.k = 10;
    SCOPED_TRACE(s.str());
    Result w, ra, rb;
    ASSERT_EQ(run_search(whole.get(), q, s, w), UDF_OK) << udf_last_error();
    ASSERT_EQ(run_search(a.get(), q, s, ra), UDF_OK) << udf_last_error();
    ASSERT_EQ(run_search(b.get(), q, s, rb), UDF_OK) << udf_last_error();
    int64_t id_checked = 0;
    for (int64_t row = 0; row < q.rows; ++row) {
      std::vector<std::pair<float, int64_t>> m;
      for (uint32_t j = 0; j < s.k; ++j) {
        if (ra.ids[row * s.k + j] >= 0) m.emplace_back(ra.dist[row * s.k + j], ra.ids[row * s.k + j]);
        if (rb.ids[row * s.k + j] >= 0) m.emplace_back(rb.dist[row * s.k + j], rb.ids[row * s.k + j]);
      }
      std::stable_sort(m.begin(), m.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      ASSERT_GE(m.size(), s.k);
      for (uint32_t j = 0; j < s.k; ++j) {
        const size_t at = size_t(row) * s.k + j;
        ASSERT_EQ(std::memcmp(&m[j].first, &w.dist[at], 4), 0)
            << "query " << row << " rank " << j << ": parts " << fmt_float(m[j].first) << ", one index " << fmt_float(w.dist[at]);
        const bool tie = (j > 0 && w.dist[at - 1] == w.dist[at]) || (j + 1 < s.k && w.dist[at + 1] == w.dist[at]) ||
                         (j + 1 == s.k && m.size() > s.k && m[s.k].first == w.dist[at]);
        if (!tie) {
          EXPECT_EQ(m[j].second, w.ids[at]) << "query " << row << " rank " << j;
          ++id_checked;
        }
      }
    }
    EXPECT_GT(id_checked, q.rows * int64_t(s.k) / 2);
  }
}

// ------------------------------------------------------------------ chunked builds

// udf_index_build_chunked over one module and over each layout: the index
// a build over chunk 0 and adds of the rest give (host chunks of several
// sizes, explicit ids, a chunk in device memory), its lists and results bit
// for bit; each chunk asked for twice (chunk 0 three times); a failing
// callback, a chunk that changes, no chunks and a small chunk 0 refused.
TEST_F(Shards, ChunkedBuildIsBuildThenAdd) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "builtin.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "udf_builtin_l2";
  const int64_t dim = 20;
  const uint32_t n_lists = 36;
  const std::vector<double> centers = centers_for(rng, 18, dim);
  std::vector<Data> chunks;
  for (int64_t rows : {5000, 1700, 3100, 900}) chunks.push_back(clustered(rng, UDF_DTYPE_F32, rows, dim, centers));
  const Data q = clustered(rng, UDF_DTYPE_F32, 200, dim, centers);
  std::vector<int64_t> ids2(chunks[2].rows);
  for (size_t i = 0; i < ids2.size(); ++i) ids2[i] = 900000 + 3 * int64_t(i);
  DevMem dev3(chunks[3].bytes.data(), chunks[3].bytes.size());
  auto data_of = [&](size_t c) {
    return c == 3 ? udf::tensor(dev3.ptr(), UDF_DTYPE_F32, chunks[3].rows, dim, 0) : chunks[c].tensor();
  };
  const udf_tensor ids2_t = udf::tensor(ids2.data(), UDF_DTYPE_I64, chunks[2].rows, 1);
  const udf_index_params p = index_params(n_lists, seed);
  // The reference: a build and three adds on one GPU.
  Index want = build_one(home, metric, chunks[0], p);
  ASSERT_TRUE(want);
  for (size_t c = 1; c < chunks.size(); ++c) {
    const udf_tensor t = data_of(c);
    ASSERT_EQ(udf_index_add(want.get(), &t, c == 2 ? &ids2_t : nullptr), UDF_OK) << udf_last_error();
  }
  struct Source {
    std::function<udf_tensor(size_t)> data;
    const udf_tensor* ids2 = nullptr;
    std::vector<int> calls = std::vector<int>(4, 0);
    int fail_at_call = -1;  // the n-th call overall returns non-zero
    int shrink_chunk = -1;  // this chunk has a row fewer the second time
    int n = 0;
  };
  udf_chunk_fn fn = [](void* user, size_t c, udf_tensor* data, udf_tensor* ids) -> int {
    auto* s = static_cast<Source*>(user);
    if (s->n++ == s->fail_at_call) return 7;
    *data = s->data(c);
    if (int(c) == s->shrink_chunk && s->calls[c] > 0) data->rows -= 1;
    ++s->calls[c];
    if (c == 2) *ids = *s->ids2;
    return 0;
  };
  auto chunked = [&](const std::vector<udf_module*>& ms, Source& src, udf_status* status = nullptr,
                     size_t n_chunks = 4, const udf_index_params* pp = nullptr) {
    udf_index* ix = nullptr;
    const udf_status st = udf_index_build_chunked(ms.data(), ms.size(), metric, n_chunks, fn, &src, pp ? pp : &p, &ix);
    if (status)
      *status = st;
    else
      EXPECT_EQ(st, UDF_OK) << udf_last_error();
    return Index(ix);
  };
  auto expect_same = [&](udf_index* got) {
    expect_same_lists(want.get(), got);
    for (uint32_t k : {10u, 100u})
      for (uint32_t probes : {5u, n_lists}) {
        Search s;
        s.k = k;
        s.probes = probes;
        SCOPED_TRACE(s.str());
        Result a, b;
        ASSERT_EQ(run_search(want.get(), q, s, a), UDF_OK) << udf_last_error();
        ASSERT_EQ(run_search(got, q, s, b), UDF_OK) << udf_last_error();
        ASSERT_TRUE(same_results(a, b, k));
      }
  };
  {
    SCOPED_TRACE("one GPU");
    Source src{data_of, &ids2_t};
    Index got = chunked({home}, src);
    ASSERT_TRUE(got);
    size_t n_shards = 0;
    ASSERT_EQ(udf_index_shard_count(got.get(), &n_shards), UDF_OK);
    EXPECT_EQ(n_shards, 1u);
    EXPECT_EQ(src.calls, (std::vector<int>{3, 2, 2, 2}));
    expect_same(got.get());
    // It adds as any index does.
    const udf_tensor t = chunks[1].tensor();
    Index more = chunked({home}, src);
    ASSERT_EQ(udf_index_add(more.get(), &t, nullptr), UDF_OK) << udf_last_error();
    udf_index_info info{};
    ASSERT_EQ(udf_index_info_get(more.get(), &info), UDF_OK);
    EXPECT_EQ(info.size, 5000 + 1700 + 3100 + 900 + 1700);
  }
  for (size_t li = 0; li < lay.size(); ++li) {
    SCOPED_TRACE("devices " + lay[li].name);
    Source src{data_of, &ids2_t};
    udf_index_params pl = p;
    pl.shard_layout = lay[li].shard_layout;
    Index got = chunked(mods[li], src, nullptr, 4, &pl);
    ASSERT_TRUE(got);
    expect_shards(got.get(), lay[li], true);  // cut by the final sizes: balanced
    expect_same(got.get());
  }
  // Refusals.
  for (int at : {0, 1, 3, 6}) {  // chunk 0's first call, pass 1's chunk 0 and 2, pass 2's chunk 1
    SCOPED_TRACE("callback fails at call " + std::to_string(at));
    Source src{data_of, &ids2_t};
    src.fail_at_call = at;
    udf_status st = UDF_OK;
    EXPECT_FALSE(chunked(mods.back(), src, &st));
    EXPECT_EQ(st, UDF_ERROR_IO);
    EXPECT_TRUE(contains_nocase(udf_last_error(), "returned 7 for chunk")) << udf_last_error();
  }
  {
    Source src{data_of, &ids2_t};
    src.shrink_chunk = 1;
    udf_status st = UDF_OK;
    EXPECT_FALSE(chunked({home}, src, &st));
    EXPECT_EQ(st, UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains_nocase(udf_last_error(), "chunk 1 has")) << udf_last_error();
  }
  {
    Source src{data_of, &ids2_t};
    udf_status st = UDF_OK;
    EXPECT_FALSE(chunked({home}, src, &st, 0));
    EXPECT_EQ(st, UDF_ERROR_INVALID_ARGUMENT);
    const udf_index_params big = index_params(6000, seed);
    EXPECT_FALSE(chunked({home}, src, &st, 4, &big));
    EXPECT_EQ(st, UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains_nocase(udf_last_error(), "n_lists")) << udf_last_error();
  }
}

// ------------------------------------------------------------------ device memory and async

// weighted_l2 with its weights and the queries in device memory on the
// first device, outputs on the host or the device; udf_index_search_async
// on a caller stream of the first device (device queries, then host queries
// overwritten as soon as the call returns) and on the runtime's stream
// (NULL); all give the one-GPU blocking results with host memory.  Host
// outputs are refused for async, naming udf_index_search; destroying an
// index with a search queued waits for it.
TEST_F(Shards, AsyncSearchAndDeviceMemoryOnTheFirstDevice) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "udfs.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "weighted_l2";
  const std::vector<uint32_t> ks = ks_for(home, metric);
  const int64_t dim = 48, n = 2000;
  const uint32_t probes = 16;
  const std::vector<double> centers = centers_for(rng, 30, dim);
  const Data base = clustered(rng, UDF_DTYPE_F32, 16000, dim, centers);
  const Data q = concat(base.rows_of(0, 500), clustered(rng, UDF_DTYPE_F32, n - 500, dim, centers));
  std::vector<float> w = weights_for(rng, dim);
  const udf_tensor w_host = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  Cu::I().use();
  DevMem w_dev_mem(w.data(), w.size() * 4);
  const udf_tensor w_dev = udf::tensor(w_dev_mem.ptr(), UDF_DTYPE_F32, dim, 1, 0);
  DevMem q_dev_mem(q.bytes.data(), q.bytes.size());
  const udf_tensor q_dev = udf::tensor(q_dev_mem.ptr(), UDF_DTYPE_F32, n, dim, 0);
  const std::vector<udf_capture_binding> caps_host = {{"weights", &w_host, 0, 0}};
  const std::vector<udf_capture_binding> caps_dev = {{"weights", &w_dev, 0, 0}};
  const udf_index_params p = index_params(64, seed);
  Index one = build_one(home, metric, base, p);
  ASSERT_TRUE(one);
  CUstream stream = nullptr;
  ASSERT_EQ(Cu::I().stream_create(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  struct StreamGuard {
    CUstream s;
    ~StreamGuard() { Cu::I().stream_destroy(s); }
  } stream_guard{stream};
  const uint32_t kmax = ks.back();
  DevMem od_mem(size_t(n) * kmax * 4), oi_mem(size_t(n) * kmax * 8);
  auto fetch = [&](uint32_t k, Result& r) {
    Cu::I().use();  // the runtime calls restore the thread's context; this does not rely on it
    r.dist.assign(size_t(n) * k, 0.0f);
    r.ids.assign(size_t(n) * k, 0);
    ASSERT_EQ(Cu::I().dtoh(r.dist.data(), od_mem.p, r.dist.size() * 4), CUDA_SUCCESS);
    ASSERT_EQ(Cu::I().dtoh(r.ids.data(), oi_mem.p, r.ids.size() * 8), CUDA_SUCCESS);
  };
  auto poison_outputs = [&]() {
    Cu::I().use();
    std::vector<uint8_t> ff(size_t(n) * kmax * 8, 0xFF);
    ASSERT_EQ(Cu::I().htod(od_mem.p, ff.data(), size_t(n) * kmax * 4), CUDA_SUCCESS);
    ASSERT_EQ(Cu::I().htod(oi_mem.p, ff.data(), size_t(n) * kmax * 8), CUDA_SUCCESS);
  };
  for (size_t li = 0; li < lay.size(); ++li) {
    SCOPED_TRACE("devices " + lay[li].name);
    Index sh = build_sharded(mods[li], metric, base, p, lay[li].shard_layout);
    ASSERT_TRUE(sh);
    void* rt_stream = nullptr;
    ASSERT_EQ(udf_runtime_stream(lay[li].rts[0], &rt_stream), UDF_OK) << udf_last_error();
    for (uint32_t k : ks) {
      Search s;
      s.k = k;
      s.probes = probes;
      s.captures = &caps_host;
      SCOPED_TRACE(s.str());
      Result want;
      ASSERT_EQ(run_search(one.get(), q, s, want), UDF_OK) << udf_last_error();
      Result got;
      // Blocking: host weights, device weights; host queries, device queries.
      ASSERT_EQ(run_search(sh.get(), q, s, got), UDF_OK) << udf_last_error();
      ASSERT_TRUE(same_results(want, got, k)) << "host queries and weights";
      s.captures = &caps_dev;
      ASSERT_EQ(run_search(sh.get(), q, s, got), UDF_OK) << udf_last_error();
      ASSERT_TRUE(same_results(want, got, k)) << "host queries, device weights";
      ASSERT_EQ(run_search(sh.get(), q_dev, s, got), UDF_OK) << udf_last_error();
      ASSERT_TRUE(same_results(want, got, k)) << "device queries and weights";
      // Blocking into device outputs.
      const udf_search_params sp = s.params();
      const udf_tensor od = udf::tensor(od_mem.ptr(), UDF_DTYPE_F32, n, k, 0);
      const udf_tensor oi = udf::tensor(oi_mem.ptr(), UDF_DTYPE_I64, n, k, 0);
      poison_outputs();
      ASSERT_EQ(udf_index_search(sh.get(), &q_dev, &sp, &od, &oi), UDF_OK) << udf_last_error();
      fetch(k, got);
      ASSERT_TRUE(same_results(want, got, k)) << "device queries, weights and outputs";
      // Async on the caller's stream: device queries.
      poison_outputs();
      ASSERT_EQ(udf_index_search_async(sh.get(), &q_dev, &sp, &od, &oi, stream), UDF_OK) << udf_last_error();
      ASSERT_EQ(Cu::I().stream_sync(stream), CUDA_SUCCESS);
      fetch(k, got);
      ASSERT_TRUE(same_results(want, got, k)) << "async, device queries, caller stream";
      // Async: host queries, overwritten with NaNs once the call returns.
      std::vector<uint8_t> hq = q.bytes;
      const udf_tensor q_host = udf::tensor(hq.data(), UDF_DTYPE_F32, n, dim);
      poison_outputs();
      ASSERT_EQ(udf_index_search_async(sh.get(), &q_host, &sp, &od, &oi, stream), UDF_OK) << udf_last_error();
      std::fill(hq.begin(), hq.end(), 0xFF);
      ASSERT_EQ(Cu::I().stream_sync(stream), CUDA_SUCCESS);
      fetch(k, got);
      ASSERT_TRUE(same_results(want, got, k)) << "async, host queries, caller stream";
      // Async on the first device's runtime stream (NULL).
      poison_outputs();
      ASSERT_EQ(udf_index_search_async(sh.get(), &q_dev, &sp, &od, &oi, nullptr), UDF_OK) << udf_last_error();
      ASSERT_EQ(Cu::I().stream_sync(static_cast<CUstream>(rt_stream)), CUDA_SUCCESS);
      fetch(k, got);
      ASSERT_TRUE(same_results(want, got, k)) << "async, device queries, the runtime's stream";
      // Host outputs are refused for async, as on one GPU.
      Result host_out;
      host_out.dist.resize(size_t(n) * k);
      host_out.ids.resize(size_t(n) * k);
      const udf_tensor hd = udf::tensor(host_out.dist.data(), UDF_DTYPE_F32, n, k);
      const udf_tensor hi = udf::tensor(host_out.ids.data(), UDF_DTYPE_I64, n, k);
      EXPECT_EQ(udf_index_search_async(one.get(), &q_dev, &sp, &hd, &hi, stream), UDF_ERROR_INVALID_ARGUMENT);
      EXPECT_EQ(udf_index_search_async(sh.get(), &q_dev, &sp, &hd, &hi, stream), UDF_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(udf_last_error()).find("udf_index_search"), std::string::npos) << udf_last_error();
    }
    // Destroying the index waits for a search still queued.
    Search s;
    s.k = ks.front();
    s.probes = probes;
    s.captures = &caps_dev;
    const udf_search_params sp = s.params();
    const udf_tensor od = udf::tensor(od_mem.ptr(), UDF_DTYPE_F32, n, s.k, 0);
    const udf_tensor oi = udf::tensor(oi_mem.ptr(), UDF_DTYPE_I64, n, s.k, 0);
    ASSERT_EQ(udf_index_search_async(sh.get(), &q_dev, &sp, &od, &oi, stream), UDF_OK) << udf_last_error();
    sh.reset();
    ASSERT_EQ(Cu::I().stream_sync(stream), CUDA_SUCCESS);
  }
}

// A udf_device_array made on the first device (runtime.h, "device arrays"):
// bound as weighted_l2's weights and as the bitmap filter's bitmap, it gives
// the host arrays' results on every layout, search after search, blocking
// and async.  The other devices read their own copy of it, made once; a new
// array made after the first is destroyed (whose memory may be the same
// address) gives its own values there, not the old copy's.
struct DeviceArrayDeleter {
  void operator()(udf_device_array* a) const { udf_device_array_destroy(a); }
};
using DeviceArrayPtr = std::unique_ptr<udf_device_array, DeviceArrayDeleter>;

DeviceArrayPtr device_array(udf_runtime* rt, const udf_tensor& host, udf_tensor* view) {
  udf_device_array* a = nullptr;
  EXPECT_EQ(udf_device_array_create(rt, &host, &a), UDF_OK) << udf_last_error();
  if (a) {
    EXPECT_EQ(udf_device_array_tensor(a, view), UDF_OK) << udf_last_error();
  }
  return DeviceArrayPtr(a);
}

TEST_F(Shards, DeviceArrayCapturesOnEveryShard) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "udfs.udfm");
  LOAD_LAYOUT_MODULES(fmods, lay, "filters.udfm");
  const int64_t dim = 48, rows = 16000;
  const std::vector<double> centers = centers_for(rng, 30, dim);
  const Data base = clustered(rng, UDF_DTYPE_F32, rows, dim, centers);
  const Data q = concat(base.rows_of(0, 50), clustered(rng, UDF_DTYPE_F32, 150, dim, centers));
  const udf_index_params p = index_params(64, seed);
  Search s;
  s.probes = 16;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("weights, array " + std::to_string(round));
    std::vector<float> w = weights_for(rng, dim);
    const udf_tensor w_host = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
    udf_tensor w_view{};
    DeviceArrayPtr wa = device_array(lay[0].rts[0], w_host, &w_view);
    ASSERT_TRUE(wa);
    const std::vector<udf_capture_binding> host_caps = {{"weights", &w_host, 0, 0}};
    const std::vector<udf_capture_binding> dev_caps = {{"weights", &w_view, 0, 0}};
    Index one = build_one(mods[0][0], "weighted_l2", base, p);
    ASSERT_TRUE(one);
    for (size_t li = 0; li < lay.size(); ++li) {
      SCOPED_TRACE("devices " + lay[li].name);
      Index sh = build_sharded(mods[li], "weighted_l2", base, p, lay[li].shard_layout);
      ASSERT_TRUE(sh);
      for (const Data& qq : {q.rows_of(3, 1), q}) {
        s.captures = &host_caps;
        Result want, got;
        ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
        s.captures = &dev_caps;
        for (int again = 0; again < 3; ++again) {
          ASSERT_EQ(run_search(sh.get(), qq, s, got), UDF_OK) << udf_last_error();
          ASSERT_TRUE(same_results(want, got, s.k)) << "search " << again << " of " << qq.rows << " queries";
        }
        ASSERT_EQ(run_search(one.get(), qq, s, got), UDF_OK) << udf_last_error();
        ASSERT_TRUE(same_results(want, got, s.k)) << "the one-GPU index, " << qq.rows << " queries";
      }
      // Async on the first device's stream, into device outputs.
      Cu::I().use();
      DevMem od(size_t(q.rows) * s.k * 4), oi(size_t(q.rows) * s.k * 8);
      const udf_tensor odt = udf::tensor(od.ptr(), UDF_DTYPE_F32, q.rows, s.k, 0);
      const udf_tensor oit = udf::tensor(oi.ptr(), UDF_DTYPE_I64, q.rows, s.k, 0);
      const udf_tensor qt = q.tensor();
      s.captures = &dev_caps;
      const udf_search_params sp = s.params();
      ASSERT_EQ(udf_index_search_async(sh.get(), &qt, &sp, &odt, &oit, nullptr), UDF_OK) << udf_last_error();
      void* rt_stream = nullptr;
      ASSERT_EQ(udf_runtime_stream(lay[li].rts[0], &rt_stream), UDF_OK) << udf_last_error();
      ASSERT_EQ(Cu::I().stream_sync(static_cast<CUstream>(rt_stream)), CUDA_SUCCESS);
      Result want, got;
      s.captures = &host_caps;
      ASSERT_EQ(run_search(one.get(), q, s, want), UDF_OK) << udf_last_error();
      got.dist.resize(size_t(q.rows) * s.k);
      got.ids.resize(size_t(q.rows) * s.k);
      Cu::I().use();
      ASSERT_EQ(Cu::I().dtoh(got.dist.data(), od.p, got.dist.size() * 4), CUDA_SUCCESS);
      ASSERT_EQ(Cu::I().dtoh(got.ids.data(), oi.p, got.ids.size() * 8), CUDA_SUCCESS);
      ASSERT_TRUE(same_results(want, got, s.k)) << "async";
    }
  }
  // The bitmap filter's bitmap (any length), over the built-in L2.
  std::vector<uint8_t> bitmap((rows + 7) / 8, 0);
  std::bernoulli_distribution take(0.2);
  for (int64_t i = 0; i < rows; ++i)
    if (take(rng)) bitmap[i / 8] |= uint8_t(1u << (i % 8));
  const udf_tensor b_host = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bitmap.size()));
  udf_tensor b_view{};
  DeviceArrayPtr ba = device_array(lay[0].rts[0], b_host, &b_view);
  ASSERT_TRUE(ba);
  const std::vector<udf_capture_binding> host_caps = {{"bitmap", &b_host, 0, 0}, {"n_ids", nullptr, 0, int32_t(rows)}};
  const std::vector<udf_capture_binding> dev_caps = {{"bitmap", &b_view, 0, 0}, {"n_ids", nullptr, 0, int32_t(rows)}};
  Index one = build_one(fmods[0][0], "udf_builtin_l2", base, p);
  ASSERT_TRUE(one);
  Search f;
  f.probes = 16;
  f.filter = "udf_builtin_bitmap";
  for (size_t li = 0; li < lay.size(); ++li) {
    SCOPED_TRACE("bitmap, devices " + lay[li].name);
    Index sh = build_sharded(fmods[li], "udf_builtin_l2", base, p, lay[li].shard_layout);
    ASSERT_TRUE(sh);
    for (const Data& qq : {q.rows_of(3, 1), q}) {
      f.filter_captures = &host_caps;
      Result want, got;
      ASSERT_EQ(run_search(one.get(), qq, f, want), UDF_OK) << udf_last_error();
      f.filter_captures = &dev_caps;
      for (int again = 0; again < 2; ++again) {
        ASSERT_EQ(run_search(sh.get(), qq, f, got), UDF_OK) << udf_last_error();
        ASSERT_TRUE(same_results(want, got, f.k)) << "search " << again << " of " << qq.rows << " queries";
      }
    }
  }
}

// ------------------------------------------------------------------ errors

// From 1024 queries the shards share out the coarse probe (each device
// probes its part of the batch and sends it to the others,
// shards/search.cpp), and stage host queries once for every device (each
// device copies and probes its slices, shards/slice_staging.h): the one-GPU
// results, bit for bit, for parts that do not divide evenly, host queries
// (of one slice a device and of several, contiguous and strided) and
// device queries, a chunked call, and with either turned off (udf_testing_paths,
// kPathNoCoarseShare, kPathNoSharedStaging).  A driver call that fails on
// one shard, before the shards meet or while they stage, fails the search
// and does not leave the others waiting; the next search is whole again.
extern "C" udf_status udf_testing_cuda_fault(const char* function, int64_t calls_first, int cuda_result,
                                             int64_t* pending);
TEST_F(Shards, SharedCoarseProbeGivesTheOneGpuResults) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  LOAD_LAYOUT_MODULES(mods, lay, "builtin.udfm");
  udf_module* home = mods[0][0];
  const char* metric = "udf_builtin_l2";
  const int64_t dim = 32;
  const uint32_t n_lists = 64;
  const std::vector<double> centers = centers_for(rng, 40, dim);
  const Data base = clustered(rng, UDF_DTYPE_F32, 20000, dim, centers);
  const Data q = concat(base.rows_of(100, 1000), clustered(rng, UDF_DTYPE_F32, 2001, dim, centers));
  // Slices of up to 1 MB (index/search.h, kQuerySliceBytes) of 128-byte
  // rows: five, or six when the devices stage them once.
  const Data big = concat(q, clustered(rng, UDF_DTYPE_F32, 40000 - q.rows, dim, centers));
  // The same rows strided: 48 floats apart.
  const int64_t wide = 48;
  std::vector<float> strided(size_t(big.rows) * wide, -1.0f);
  for (int64_t r = 0; r < big.rows; ++r)
    std::memcpy(&strided[size_t(r) * wide], big.bytes.data() + size_t(r) * dim * 4, size_t(dim) * 4);
  const udf_index_params p = index_params(n_lists, seed);
  Index one = build_one(home, metric, base, p);
  ASSERT_TRUE(one);
  struct Unset {
    ~Unset() {
      udf_testing_paths(0);
      udf_testing_cuda_fault("cuMemcpyHtoDAsync", -1, 0, nullptr);
    }
  } unset;
  Cu::I().use();
  DevMem q_dev_mem(big.bytes.data(), big.bytes.size());
  enum class Queries { host, strided, device };
  for (size_t li = 0; li < lay.size(); ++li) {
    SCOPED_TRACE("devices " + lay[li].name);
    Index sh = build_sharded(mods[li], metric, base, p, lay[li].shard_layout);
    ASSERT_TRUE(sh);
    for (const int64_t rows : {int64_t(1024), int64_t(1025), q.rows, big.rows}) {
      const Data qq = big.rows_of(0, rows);
      Result want;
      Search s;
      s.probes = 6;
      ASSERT_EQ(run_search(one.get(), qq, s, want), UDF_OK) << udf_last_error();
      for (const uint32_t max_batch : {0u, 1100u}) {
        for (const uint32_t path : {0u, kPathNoCoarseShare, kPathNoSharedStaging}) {
          for (const Queries kind : {Queries::host, Queries::strided, Queries::device}) {
            s.max_batch = max_batch;
            SCOPED_TRACE(std::to_string(rows) + " queries, " + s.str() + ", path " + std::to_string(path) +
                         (kind == Queries::device ? ", device queries" : kind == Queries::host ? ", host queries" : ", strided host queries"));
            const udf_tensor t = kind == Queries::device    ? udf::tensor(q_dev_mem.ptr(), UDF_DTYPE_F32, rows, dim, 0)
                                 : kind == Queries::strided ? udf::tensor(strided.data(), UDF_DTYPE_F32, rows, dim, UDF_HOST_DEVICE, wide)
                                                            : qq.tensor();
            Result got;
            ASSERT_EQ(udf_testing_paths(path), UDF_OK) << udf_last_error();
            ASSERT_EQ(run_search(sh.get(), t, s, got), UDF_OK) << udf_last_error();
            ASSERT_EQ(udf_testing_paths(0), UDF_OK);
            ASSERT_TRUE(same_results(want, got, s.k));
          }
        }
      }
    }
    // One shard's query upload fails (the first or the second to reach it,
    // or, of six slices, one after the first slices went up): an error
    // naming the call, then a whole search again.
    for (const Data* qq : {&q, &big}) {
      Search s;
      s.probes = 6;
      Result want;
      ASSERT_EQ(run_search(one.get(), *qq, s, want), UDF_OK) << udf_last_error();
      for (const int64_t first : {int64_t(0), int64_t(1), int64_t(4)}) {
        SCOPED_TRACE("of " + std::to_string(qq->rows) + " queries, the upload after " + std::to_string(first) +
                     " others fails");
        int64_t pending = -1;
        ASSERT_EQ(udf_testing_cuda_fault("cuMemcpyHtoDAsync", first, 1, nullptr), UDF_OK) << udf_last_error();
        Result got;
        const udf_status st = run_search(sh.get(), *qq, s, got);
        ASSERT_EQ(udf_testing_cuda_fault("cuMemcpyHtoDAsync", -1, 0, &pending), UDF_OK) << udf_last_error();
        if (pending == 0) {
          EXPECT_NE(st, UDF_OK);
          EXPECT_TRUE(contains_nocase(udf_last_error(), "cuMemcpyHtoDAsync")) << udf_last_error();
        } else {  // no more than `first` uploads: a slice a shard, each uploaded by every shard
          EXPECT_EQ(st, UDF_OK) << udf_last_error();
          EXPECT_EQ(qq, &q) << "six slices should have reached the fault";
          EXPECT_GE(first, int64_t(lay[li].rts.size())) << "the fault should have happened";
        }
        ASSERT_EQ(run_search(sh.get(), *qq, s, got), UDF_OK) << udf_last_error();
        ASSERT_TRUE(same_results(want, got, s.k));
      }
    }
  }
}


TEST_F(Shards, Errors) {
  Pool& pl = pool();
  ASSERT_EQ(pl.zero.size(), 3u) << pl.zero_error;
  const std::vector<udf_runtime*> two = {pl.zero[0], pl.zero[1]};
  LOAD_MODULES(builtin, two, "builtin.udfm");
  LOAD_MODULES(udfs, two, "udfs.udfm");
  // Two modules with the same metric symbols and different manifests (the
  // same metrics from MLIR and from LLVM IR).
  LOAD_MODULES(ir_mlir, two, "ir_mlir.udfm");
  LOAD_MODULES(ir_ll, two, "ir_ll.udfm");
  const Data base = make_data(rng, UDF_DTYPE_F32, 2000, 16);
  const udf_tensor t = base.tensor();
  const udf_index_params p = index_params(16, 1234);
  udf_index* out = nullptr;
  // A call's status, its message naming the problem (one of `needles`,
  // '|'-separated, in any case), and `out` set to NULL (poisoned() first).
  auto poisoned = [&]() -> udf_index** {
    out = reinterpret_cast<udf_index*>(0x1);
    return &out;
  };
  auto expect_error = [&](udf_status got, udf_status want, const std::string& needles, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(got, want) << udf_status_name(got) << ": " << udf_last_error();
    const std::string msg = udf_last_error();
    bool named = false;
    for (size_t at = 0; at <= needles.size();) {
      const size_t bar = std::min(needles.find('|', at), needles.size());
      named = named || contains_nocase(msg, needles.substr(at, bar - at));
      at = bar + 1;
    }
    EXPECT_TRUE(named) << "the message should name '" << needles << "': " << msg;
    EXPECT_EQ(out, nullptr) << "the output handle is set to NULL on failure";
  };
  // Build.
  expect_error(udf_index_build_sharded(nullptr, 2, "udf_builtin_l2", &t, nullptr, &p, poisoned()),
               UDF_ERROR_INVALID_ARGUMENT, "modules", "NULL modules");
  expect_error(udf_index_build_sharded(builtin.m.data(), 0, "udf_builtin_l2", &t, nullptr, &p, poisoned()),
               UDF_ERROR_INVALID_ARGUMENT, "n_modules", "n_modules 0");
  const std::vector<udf_module*> with_null = {builtin.m[0], nullptr};
  expect_error(udf_index_build_sharded(with_null.data(), 2, "udf_builtin_l2", &t, nullptr, &p, poisoned()),
               UDF_ERROR_INVALID_ARGUMENT, "modules[1]", "a NULL module");
  const std::vector<udf_module*> differ = {ir_mlir.m[0], ir_ll.m[1]};
  expect_error(udf_index_build_sharded(differ.data(), 2, "linf", &t, nullptr, &p, poisoned()), UDF_ERROR_MISMATCH,
               "modules[1]", "modules with different manifests");
  expect_error(udf_index_build_sharded(builtin.m.data(), 2, "no_such_metric", &t, nullptr, &p, poisoned()),
               UDF_ERROR_INVALID_ARGUMENT, "no_such_metric", "a metric the module lacks");
  expect_error(udf_index_build_sharded(builtin.m.data(), 2, nullptr, &t, nullptr, &p, poisoned()),
               UDF_ERROR_INVALID_ARGUMENT, "metric", "NULL metric");
  const Data u8 = make_data(rng, UDF_DTYPE_U8, 200, 16);
  const udf_tensor tu = u8.tensor();
  expect_error(udf_index_build_sharded(builtin.m.data(), 2, "udf_builtin_l2", &tu, nullptr, &p, poisoned()),
               UDF_ERROR_INVALID_ARGUMENT, "u8", "data of another element type");
  EXPECT_EQ(udf_index_build_sharded(builtin.m.data(), 2, "udf_builtin_l2", &t, nullptr, &p, nullptr),
            UDF_ERROR_INVALID_ARGUMENT);

  // udf_index_with_metric does not take a sharded index.
  Index sh = build_sharded(builtin.m, "udf_builtin_l2", base, p, UDF_SHARD_BY_LISTS);
  ASSERT_TRUE(sh);
  expect_error(udf_index_with_metric(sh.get(), builtin.m[0], "udf_builtin_l2", poisoned()), UDF_ERROR_UNSUPPORTED,
               "shard", "udf_index_with_metric on a sharded index");
  expect_error(udf_index_with_metric(sh.get(), udfs.m[0], "l2_sum", poisoned()), UDF_ERROR_UNSUPPORTED, "shard",
               "udf_index_with_metric on a sharded index, another module");

  // Load.
  const std::string path = ::testing::TempDir() + "shards_test_errors.udfi";
  ASSERT_EQ(udf_index_save(sh.get(), path.c_str()), UDF_OK) << udf_last_error();
  expect_error(udf_index_load_sharded(nullptr, 2, path.c_str(), poisoned()), UDF_ERROR_INVALID_ARGUMENT, "modules",
               "load: NULL modules");
  expect_error(udf_index_load_sharded(builtin.m.data(), 0, path.c_str(), poisoned()), UDF_ERROR_INVALID_ARGUMENT,
               "n_modules", "load: n_modules 0");
  Index linf = build_sharded(ir_mlir.m, "linf", base, p, UDF_SHARD_BY_VECTORS);
  ASSERT_TRUE(linf);
  const std::string linf_path = ::testing::TempDir() + "shards_test_errors_linf.udfi";
  ASSERT_EQ(udf_index_save(linf.get(), linf_path.c_str()), UDF_OK) << udf_last_error();
  // (The file's metric is modules[0]'s: modules[1] or its artifact for linf is at fault.)
  expect_error(udf_index_load_sharded(differ.data(), 2, linf_path.c_str(), poisoned()), UDF_ERROR_MISMATCH,
               "modules[1]|linf", "load: modules with different manifests");
  std::remove(linf_path.c_str());
  expect_error(udf_index_load_sharded(udfs.m.data(), 2, path.c_str(), poisoned()), UDF_ERROR_MISMATCH, "udf_builtin_l2",
               "load: the file's metric is not in the module");
  const std::string missing = ::testing::TempDir() + "shards_test_no_such_file.udfi";
  expect_error(udf_index_load_sharded(builtin.m.data(), 2, missing.c_str(), poisoned()), UDF_ERROR_IO,
               "shards_test_no_such_file", "load: no such file");
  // A corrupt file.
  std::vector<uint8_t> bytes = read_bytes(path);
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() / 2] ^= 1;
  const std::string corrupt = ::testing::TempDir() + "shards_test_corrupt.udfi";
  {
    std::ofstream f(corrupt, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  out = reinterpret_cast<udf_index*>(0x1);
  EXPECT_EQ(udf_index_load_sharded(builtin.m.data(), 2, corrupt.c_str(), &out), UDF_ERROR_BAD_FORMAT) << udf_last_error();
  EXPECT_EQ(out, nullptr);
  std::remove(path.c_str());
  std::remove(corrupt.c_str());
}

// ------------------------------------------------------------------ float64

// With every list probed the IVF search is exact: each layout's results
// against the float64 brute force (min and max order, f32 and i8).
TEST_F(Shards, AllListsProbedMatchFloat64) {
  const std::vector<Layout> lay = layouts();
  ASSERT_FALSE(lay.empty());
  struct Case {
    const char* file;
    const char* metric;
    udf_dtype dtype;
    bool max_order;
    RefFn ref;
    double tol;
  };
  const int64_t dim = 40;
  const uint32_t n_lists = 16;
  for (const Case& c : {Case{"builtin.udfm", "udf_builtin_l2", UDF_DTYPE_F32, false, l2, 1e-4},
                        Case{"builtin.udfm", "udf_builtin_inner_product", UDF_DTYPE_F32, true, ip, 1e-4},
                        Case{"udfs.udfm", "int8_l2", UDF_DTYPE_I8, false, l2, 0}}) {
    SCOPED_TRACE(c.metric);
    const Data base = make_data(rng, c.dtype, 4000, dim);
    for (const Layout& l : lay) {
      SCOPED_TRACE("devices " + l.name);
      LOAD_MODULES(mods, l.rts, c.file);
      const std::vector<uint32_t> ks = ks_for(mods.m[0], c.metric);
      Index sh = build_sharded(mods.m, c.metric, base, index_params(n_lists, seed), l.shard_layout);
      ASSERT_TRUE(sh);
      for (uint32_t k : ks)
        for (int64_t nq : {int64_t(1), int64_t(150)}) {
          const Data q = make_data(rng, c.dtype, nq, dim);
          Result r;
          ASSERT_EQ(search(sh.get(), q, k, n_lists, r), UDF_OK) << udf_last_error();
          expect_exact(base, q, r, k, c.max_order, c.ref, c.tol);
        }
    }
  }
}

}  // namespace
