// Search benchmark (issue 10): IVF-Flat search end to end, through the C API (usage: kUsage).
//
// For each data set (clustered: a Gaussian mixture of well-separated clusters; overlap: the same
// mixture with a wider spread (--spread), whose neighbourhoods cross clusters, so recall needs
// more probes -- the hard data of issue 33; many: a mixture of many more clusters than the
// index has lists (4 x --lists by default), spread 0.55 (--many-spread), so that the lists'
// sizes are uneven at the overlap family's recall (issue 49); uniform in [-1,1]^D), element type and metric
// it builds an index (wall time of udf_index_build; --balance and --mesoclusters set
// udf_index_params' balance and kmeans_mesoclusters)
// and reports its lists' balance: the mean list size, the probe-weighted mean size
// sum(s^2) / sum(s) (a query probes a list about in proportion to its size s, so this is the
// size a probed list has on average), their ratio, and the largest list over the mean.
// --clusters N sets the mixtures' cluster count (clustered, overlap and many).  Then, for each
// batch x n_probes x k, it times
// udf_index_search: 4 warm-up calls, then R repetitions, each on a different query batch and
// each after evicting the L2 cache (a 256 MB device memset), host arrays in and out, the wall
// clock around the search call only.  It reports the median and p10/p90 latency, QPS and the
// median stage times of udf_index_last_search_stats, and recall@k on a fixed evaluation set
// (the first min(batch, 1000) of 1000 queries) against the same index searched with
// n_probes = n_lists (every list scanned: the exact answer under the metric).  For f32 l2 it
// also times n_probes 32, k 10 with device arrays in and out.
//
// Metrics by element type: f32 l2 = udf_builtin_l2, f32 weighted_l2 = weighted_l2 (capture
// weights: f32[dim] = linspace(0.5, 2.0); declared monotone in bench.udfm, not in
// bench_plain.udfm), f16 l2 = f16_l2, i8 l2 = int8_l2 (i8 = round(100 x)
// clamped to [-127, 127]); l2_v2_state and l2_v2_vector = squared L2 written as an ABI v2 state
// UDF (l2_state_<elem>) and as an ABI v2 vector UDF (l2_vector_<elem>, test/gpu/metrics_v2/),
// for f32, f16 and i8, to compare with the v1 l2 (--metrics l2,l2_v2_state,l2_v2_vector); those
// the module lacks are skipped with a note.
//
// --devices 0,1 builds each index sharded over those CUDA devices (udf_index_build_sharded: one
// runtime per distinct device, the module loaded on each; a device may be listed twice, 0,0 being
// two shards on one GPU) and searches it like a one-GPU index, with queries and device arrays on
// the first device (the home).  It reports each shard's device, lists and vectors, and how the
// shards' top-k reach the home (udf_index_shard_transport).  Without it: one GPU, device 0.
// --shard-layout lists|vectors: how the shards split the vectors (udf_shard_layout; default vectors).
// --filters none,SYMBOL[:NAME=INT...]: each host-array cell is timed once per item, unfiltered
// ("none") or with the module's filter SYMBOL (udf_search_params.filter), its scalar i32 captures
// bound by name (query_group:n_groups=2: test/unit/runtime_udfs/query_group.cu); the row's metric
// reads METRIC+SYMBOL.  Recall is against the same search (filter included) over every list.
// --max-batch N: udf_search_params.max_batch (queries per internal chunk; default automatic).
// --testing-paths BITS: udf_testing_paths(BITS) before anything else (docs/runtime.md, "The path
// hook": paths that give the same results, such as 512, no coarse probe shared out between the
// shards), for A/B runs of the runtime's own choices.  A list (0,512) times each host-array cell
// under each in turn, --path-rounds R times over (rows labelled "[paths N]"): an A/B in one
// process, over one index.
//
// --dump-dir DIR writes, as .npy (C order), for each data set and element type:
// DATA_ELEM_base.npy (rows x dim), DATA_ELEM_queries.npy (the 1000 evaluation queries),
// DATA_ELEM_METRIC_ref_kK.npy (int64 reference ids, 1000 x K), and weights.npy.
// --dump-results DIR writes, for each cell of the host-array grid, the last
// timed search's outputs as DATA_ELEM_METRIC_bB_pP_kK_{dist,ids}.npy, so that
// two builds' results can be compared byte for byte (the queries are the
// same for the same options: `cmp` the two folders' files).
// Prints a markdown table; --json writes every sample (bench/search_bench.py reads it).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "udf/runtime.h"

// The runtime's path hook (exported by libudf_runtime.so, not in runtime.h): --testing-paths.
extern "C" udf_status udf_testing_paths(uint32_t paths);

namespace {

constexpr const char* kUsage =
    "usage: search_bench MODULE.udfm [--rows N] [--dim D] [--lists L] [--data clustered|overlap|many|uniform|all]\n"
    "                    [--spread S] [--many-spread S] [--clusters N] [--balance B] [--mesoclusters M]\n"
    "                    [--elem f32|f16|i8|all] [--batches 1,100,10000] [--probes 8,16,32,64,128,256]\n"
    "                    [--ks 10,100] [--metrics l2,weighted_l2,l2_v2_state,l2_v2_vector|all] [--reps R] [--qpi Q]\n"
    "                    [--json FILE] [--dump-dir DIR] [--dump-results DIR]\n"
    "                    [--quick] [--warm-l2] [--devices 0,1] [--shard-layout lists|vectors]\n"
    "                    [--testing-paths BITS[,BITS...]] [--path-rounds R]\n"
    "                    [--filters none,SYMBOL[:NAME=INT...][,...]] [--max-batch N]\n";
constexpr int64_t kEvalQueries = 1000;        // the recall set
constexpr uint32_t kClusters = 1024;          // clustered and overlap data: centres uniform in [-1,1]^D
constexpr float kSigma = 0.15f;               // and Gaussian spread around each (clustered)
constexpr float kOverlapSigma = 0.92f;        // overlap data: the default --spread
constexpr float kManySigma = 0.55f;           // many data: the default --many-spread
constexpr uint32_t kManyClustersPerList = 4;  // many data: 4 x --lists centres, uniform in [-1,1]^D
constexpr uint32_t kMaxClusters = 1u << 24;   // --clusters at most (the centres are drawn on the host)
constexpr float kI8Scale = 100.0f;            // i8 = round(100 x) clamped to [-127, 127]
constexpr size_t kEvictBytes = 256u << 20;    // written before each timed search: larger than any L2
constexpr uint32_t kSeed = 20251123;

[[noreturn]] void usage_error(const std::string& why) {
  std::fprintf(stderr, "search_bench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "search_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(udf_status s, const char* call) {
  if (s != UDF_OK) fail(std::string(call) + ": " + udf_last_error() + " (" + udf_status_name(s) + ")");
}

// ---------------------------------------------------------------- options

// One item of --filters: no filter (symbol empty), or a filter of the module and its scalar i32 captures.
struct FilterChoice {
  std::string symbol;
  std::vector<std::pair<std::string, int32_t>> captures;
};

struct Options {
  std::string module, json_path, dump_dir, results_dir;
  int64_t rows = 1000000, dim = 128;
  uint32_t lists = 1024;
  std::vector<std::string> data{"clustered", "uniform"}, elems{"f32", "f16", "i8"}, metrics{"l2", "weighted_l2"};
  std::vector<uint32_t> batches{1, 100, 10000}, probes{8, 16, 32, 64, 128, 256}, ks{10, 100};
  uint32_t reps = 0;  // 0: by batch size (reps_for)
  uint32_t qpi = 0;   // udf_search_params.queries_per_item (0: the runtime's choice)
  float spread = kOverlapSigma;     // the overlap data's Gaussian spread around each centre
  float many_spread = kManySigma;   // the many data's
  uint32_t clusters = 0;         // --clusters: the mixtures' centres (0: 1024, and 4 x lists for many)
  double balance = -1;           // --balance: udf_index_params.balance (< 0: the runtime's default)
  uint32_t mesoclusters = 0;     // --mesoclusters: udf_index_params.kmeans_mesoclusters (0: the runtime's default)
  bool quick = false;
  bool warm_l2 = false;  // diagnostic: no L2 eviction before a timed search (not the tables' method)
  std::vector<int32_t> devices;  // --devices: the index sharded over these CUDA ordinals (empty: one GPU, device 0)
  uint32_t shard_layout = UDF_SHARD_DEFAULT;  // --shard-layout lists|vectors (with --devices)
  std::vector<uint32_t> testing_paths{0};     // --testing-paths: udf_testing_paths' bits (several: an A/B)
  uint32_t path_rounds = 1;                   // --path-rounds: the A/B's rounds
  std::vector<FilterChoice> filters{FilterChoice{}};  // --filters (the default: unfiltered only)
  uint32_t max_batch = 0;                     // --max-batch: udf_search_params.max_batch (0: automatic)
  bool path_ab() const { return testing_paths.size() > 1; }

  // The centres of data family `data` (uniform has none).
  uint32_t clusters_for(const std::string& data) const {
    if (clusters) return clusters;
    return data == "many" ? static_cast<uint32_t>(std::min<uint64_t>(uint64_t(kManyClustersPerList) * lists, kMaxClusters)) : kClusters;
  }

  uint32_t reps_for(uint32_t batch) const {
    if (reps) return reps;
    const uint32_t r = batch < 10 ? 200 : batch < 1000 ? 50 : 10;
    return quick ? std::max(1u, r / 5) : r;
  }
};

// A whole number in 1 .. max.
uint64_t parse_count(const std::string& opt, const std::string& v, uint64_t max = UINT32_MAX) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end || errno || n == 0 || n > max) usage_error("bad value for " + opt + ": '" + v + "'");
  return n;
}

// --testing-paths: comma-separated bit sets, 0 allowed.
std::vector<uint32_t> parse_paths(const std::string& opt, const std::string& v);

std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t comma = v.find(',', at);
    out.push_back(v.substr(at, comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

// A Gaussian spread: a positive finite number.
float parse_spread(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const float f = std::strtof(v.c_str(), &end);
  if (v.empty() || *end || errno || !(f > 0.0f) || !std::isfinite(f)) usage_error("bad value for " + opt + ": '" + v + "'");
  return f;
}

// udf_index_params.balance: 0 (no cap) or a finite number >= 1, as udf_index_build accepts.
double parse_balance(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double b = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || errno || !std::isfinite(b) || !(b == 0 || b >= 1)) usage_error("bad value for " + opt + ": '" + v + "'");
  return b;
}

// CUDA ordinals, comma-separated: whole numbers >= 0, repeats allowed.
std::vector<int32_t> parse_devices(const std::string& opt, const std::string& v) {
  std::vector<int32_t> out;
  for (const std::string& s : split(v)) {
    const bool digits = !s.empty() && s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) usage_error("bad value for " + opt + ": '" + s + "'");
    out.push_back(std::atoi(s.c_str()));
  }
  return out;
}

std::vector<uint32_t> parse_counts(const std::string& opt, const std::string& v) {
  std::vector<uint32_t> out;
  for (const std::string& s : split(v)) out.push_back(static_cast<uint32_t>(parse_count(opt, s)));
  return out;
}

std::vector<uint32_t> parse_paths(const std::string& opt, const std::string& v) {
  std::vector<uint32_t> out;
  for (const std::string& p : split(v)) {
    char* end = nullptr;
    errno = 0;
    const unsigned long n = std::strtoul(p.c_str(), &end, 10);
    if (p.empty() || p[0] == '-' || *end || errno || n >= (1ul << 30)) usage_error("bad value for " + opt + ": '" + v + "'");
    out.push_back(static_cast<uint32_t>(n));
  }
  return out;
}

// --filters: comma-separated items, "none" or SYMBOL[:NAME=INT[:NAME=INT...]].
std::vector<FilterChoice> parse_filters(const std::string& opt, const std::string& v) {
  std::vector<FilterChoice> out;
  for (const std::string& item : split(v)) {
    FilterChoice f;
    size_t at = item.find(':');
    f.symbol = item.substr(0, at);
    if (f.symbol.empty()) usage_error("bad value for " + opt + ": '" + item + "'");
    if (f.symbol == "none") f.symbol.clear();
    while (at != std::string::npos) {
      const size_t next = item.find(':', at + 1);
      const std::string cap = item.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
      const size_t eq = cap.find('=');
      char* end = nullptr;
      errno = 0;
      const long n = eq == std::string::npos ? 0 : std::strtol(cap.c_str() + eq + 1, &end, 10);
      if (f.symbol.empty() || eq == 0 || eq == std::string::npos || eq + 1 == cap.size() || *end || errno || n < INT32_MIN ||
          n > INT32_MAX)
        usage_error("bad capture in " + opt + ": '" + cap + "' (NAME=INT after a filter's symbol)");
      f.captures.emplace_back(cap.substr(0, eq), static_cast<int32_t>(n));
      at = next;
    }
    out.push_back(std::move(f));
  }
  return out;
}

// A comma list of names from `allowed`; `all_word` (e.g. "both") stands for every name.
std::vector<std::string> parse_names(const std::string& opt, const std::string& v, const std::vector<std::string>& allowed,
                                     const char* all_word) {
  if (v == all_word) return allowed;
  std::vector<std::string> out = split(v);
  for (const std::string& s : out)
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) usage_error("bad value for " + opt + ": '" + s + "'");
  return out;
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool probes_set = false, ks_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") { std::printf("%s", kUsage); std::exit(0); }
    if (a == "--quick") { o.quick = true; continue; }
    if (a == "--warm-l2") { o.warm_l2 = true; continue; }
    if (a.rfind("--", 0) != 0) {
      if (!o.module.empty()) usage_error("unexpected argument '" + a + "'");
      o.module = a;
      continue;
    }
    if (i + 1 >= argc) usage_error(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--rows") o.rows = static_cast<int64_t>(parse_count(a, v, 1ull << 40));
    else if (a == "--dim") o.dim = static_cast<int64_t>(parse_count(a, v));
    else if (a == "--lists") o.lists = static_cast<uint32_t>(parse_count(a, v));
    else if (a == "--data") o.data = parse_names(a, v, {"clustered", "overlap", "many", "uniform"}, "all");
    else if (a == "--spread") o.spread = parse_spread(a, v);
    else if (a == "--many-spread") o.many_spread = parse_spread(a, v);
    else if (a == "--clusters") o.clusters = static_cast<uint32_t>(parse_count(a, v, kMaxClusters));
    else if (a == "--balance") o.balance = parse_balance(a, v);
    else if (a == "--mesoclusters") o.mesoclusters = static_cast<uint32_t>(parse_count(a, v, 16384));
    else if (a == "--elem") o.elems = parse_names(a, v, {"f32", "f16", "i8"}, "all");
    else if (a == "--metrics") o.metrics = parse_names(a, v, {"l2", "weighted_l2", "l2_v2_state", "l2_v2_vector"}, "all");
    else if (a == "--batches") o.batches = parse_counts(a, v);
    else if (a == "--probes") o.probes = parse_counts(a, v), probes_set = true;
    else if (a == "--ks") o.ks = parse_counts(a, v), ks_set = true;
    else if (a == "--reps") o.reps = static_cast<uint32_t>(parse_count(a, v));
    else if (a == "--qpi") o.qpi = static_cast<uint32_t>(parse_count(a, v, 64));
    else if (a == "--json") o.json_path = v;
    else if (a == "--dump-dir") o.dump_dir = v;
    else if (a == "--dump-results") o.results_dir = v;
    else if (a == "--devices") o.devices = parse_devices(a, v);
    else if (a == "--testing-paths") o.testing_paths = parse_paths(a, v);
    else if (a == "--path-rounds") o.path_rounds = static_cast<uint32_t>(parse_count(a, v, 100));
    else if (a == "--filters") o.filters = parse_filters(a, v);
    else if (a == "--max-batch") o.max_batch = static_cast<uint32_t>(parse_count(a, v));
    else if (a == "--shard-layout") {
      if (v == "lists")
        o.shard_layout = UDF_SHARD_BY_LISTS;
      else if (v == "vectors")
        o.shard_layout = UDF_SHARD_BY_VECTORS;
      else
        usage_error("--shard-layout takes lists or vectors, not '" + v + "'");
    }
    else usage_error("unknown option " + a);
  }
  if (o.module.empty()) usage_error("no module given");
  if (o.quick && !probes_set) o.probes = {8, 32, 128};
  if (o.quick && !ks_set) o.ks = {10};
  return o;
}

// ---------------------------------------------------------------- the CUDA driver

// The few driver calls the bench makes itself (L2 eviction, device arrays, the device's name),
// through dlopen like the runtime: the bench links only libudf_runtime.  Used after
// udf_runtime_create, in the primary context of device `ordinal` (0, or the first of --devices:
// the index's home), which the runtime also uses; each call makes that context current first.
// With --devices, the other devices are its peers: evict_l2 evicts their L2 caches too.
class Driver {
 public:
  using CUdeviceptr = unsigned long long;

  explicit Driver(int ordinal) : ordinal_(ordinal) {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib_) fail(std::string("dlopen libcuda.so.1: ") + dlerror());
    int dev = 0;
    void* ctx = nullptr;
    call("cuInit", sym<int (*)(unsigned)>("cuInit")(0));
    call("cuDeviceGet", sym<int (*)(int*, int)>("cuDeviceGet")(&dev, ordinal));
    call("cuDevicePrimaryCtxRetain", sym<int (*)(void**, int)>("cuDevicePrimaryCtxRetain")(&ctx, dev));
    ctx_ = ctx;
    set_current_ = sym<int (*)(void*)>("cuCtxSetCurrent");
    make_current();
    char name[256] = {};
    call("cuDeviceGetName", sym<int (*)(char*, int, int)>("cuDeviceGetName")(name, sizeof name, dev));
    name_ = name;
    call("cuDriverGetVersion", sym<int (*)(int*)>("cuDriverGetVersion")(&version_));
    alloc_ = sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
    free_ = sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
    htod_ = sym<int (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD_v2");
    memset_ = sym<int (*)(CUdeviceptr, unsigned char, size_t)>("cuMemsetD8_v2");
    sync_ = sym<int (*)()>("cuCtxSynchronize");
    evict_buffer_ = alloc(kEvictBytes);
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  ~Driver() {
    set_current_(ctx_);
    free_(evict_buffer_);
  }

  const std::string& device_name() const { return name_; }
  int version() const { return version_; }
  int ordinal() const { return ordinal_; }
  // Another device whose L2 evict_l2 also evicts (a shard's, --devices).
  void add_peer(int ordinal) {
    peers_.push_back(std::make_unique<Driver>(ordinal));
    make_current();
  }

  CUdeviceptr alloc(size_t bytes) {
    make_current();
    CUdeviceptr p = 0;
    call("cuMemAlloc", alloc_(&p, bytes));
    return p;
  }
  void release(CUdeviceptr p) {
    make_current();
    call("cuMemFree", free_(p));
  }
  CUdeviceptr upload(const void* src, size_t bytes) {
    const CUdeviceptr p = alloc(bytes);
    call("cuMemcpyHtoD", htod_(p, src, bytes));
    return p;
  }
  // Overwrites the whole L2 cache (the peers' first, then this device's) with an unrelated buffer,
  // so the next search reads its lists (and centroids) from device memory as a cold query would.
  void evict_l2() {
    for (const auto& peer : peers_) peer->evict_l2();
    make_current();
    call("cuMemsetD8", memset_(evict_buffer_, static_cast<unsigned char>(++evict_value_), kEvictBytes));
    call("cuCtxSynchronize", sync_());
  }

 private:
  template <class Fn>
  Fn sym(const char* name) {
    void* p = dlsym(lib_, name);
    if (!p) fail(std::string("libcuda.so.1 has no ") + name);
    return reinterpret_cast<Fn>(p);
  }
  static void call(const char* what, int result) {
    if (result != 0) fail(std::string(what) + " failed: CUresult " + std::to_string(result));
  }

  void make_current() { call("cuCtxSetCurrent", set_current_(ctx_)); }

  void* lib_ = nullptr;
  void* ctx_ = nullptr;
  int (*set_current_)(void*) = nullptr;
  std::vector<std::unique_ptr<Driver>> peers_;
  int ordinal_ = 0;
  std::string name_;
  int version_ = 0;
  int (*alloc_)(CUdeviceptr*, size_t) = nullptr;
  int (*free_)(CUdeviceptr) = nullptr;
  int (*htod_)(CUdeviceptr, const void*, size_t) = nullptr;
  int (*memset_)(CUdeviceptr, unsigned char, size_t) = nullptr;
  int (*sync_)() = nullptr;
  CUdeviceptr evict_buffer_ = 0;
  unsigned evict_value_ = 0;
};

// ---------------------------------------------------------------- data

// Runs fn(0 .. n-1) on every core; fn must only touch its own part of the output.
template <class Fn>
void parallel_for(int64_t n, Fn fn) {
  const int64_t n_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(n, 1));
  std::atomic<int64_t> next{0};
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < n_threads; ++t)
    pool.emplace_back([&] {
      for (int64_t i; (i = next++) < n;) fn(i);
    });
  for (std::thread& t : pool) t.join();
}

// Vectors drawn from one distribution.  Each block of rows has its own generator, seeded from
// (distribution, stream, block), so the output does not depend on the number of threads and
// data, evaluation queries and each query pool are independent draws.
class Distribution {
 public:
  // The data families (--data); the values seed the generators: uniform and clustered draw what
  // they drew before the overlap family existed, and the three what they drew before many did.
  enum Kind : uint32_t { kUniform = 0, kClustered = 1, kOverlap = 2, kMany = 3 };
  // A mixture of `clusters` centres (unused for uniform), spread `sigma` around each.  overlap:
  // the clustered mixture's centres; many: centres of its own.
  Distribution(Kind kind, float sigma, int64_t dim, uint32_t clusters)
      : kind_(kind), sigma_(sigma), dim_(dim), clusters_(clusters) {
    if (kind == kUniform) return;
    std::mt19937_64 rng = generator(kCentresStream, 0);
    std::uniform_real_distribution<float> coord(-1.0f, 1.0f);
    centres_.resize(size_t(clusters) * dim);
    for (float& c : centres_) c = coord(rng);
  }

  std::vector<float> draw(int64_t n, uint32_t stream) const {
    constexpr int64_t kBlockRows = 4096;
    std::vector<float> out(size_t(n) * dim_);
    parallel_for((n + kBlockRows - 1) / kBlockRows, [&](int64_t block) {
      std::mt19937_64 rng = generator(stream, static_cast<uint32_t>(block));
      std::uniform_real_distribution<float> coord(-1.0f, 1.0f);
      std::normal_distribution<float> noise(0.0f, sigma_);
      std::uniform_int_distribution<int> pick(0, static_cast<int>(clusters_) - 1);
      for (int64_t r = block * kBlockRows; r < std::min(n, (block + 1) * kBlockRows); ++r) {
        float* row = &out[size_t(r) * dim_];
        if (kind_ != kUniform) {
          const float* c = &centres_[size_t(pick(rng)) * dim_];
          for (int64_t j = 0; j < dim_; ++j) row[j] = c[j] + noise(rng);
        } else {
          for (int64_t j = 0; j < dim_; ++j) row[j] = coord(rng);
        }
      }
    });
    return out;
  }

  static constexpr uint32_t kCentresStream = 0, kBaseStream = 1, kEvalStream = 2, kPoolStream = 3;  // + batch index

 private:
  std::mt19937_64 generator(uint32_t stream, uint32_t block) const {
    // The overlap data's centres are the clustered data's; its points are other draws.
    const uint32_t kind = stream == kCentresStream && kind_ == kOverlap ? kClustered : kind_;
    std::seed_seq seq{kSeed, kind, stream, block};
    return std::mt19937_64(seq);
  }

  Kind kind_;
  float sigma_;
  int64_t dim_;
  uint32_t clusters_;
  std::vector<float> centres_;
};

struct Elem {
  const char* name;
  udf_dtype dtype;
  const char* npy_descr;
};
constexpr Elem kElems[] = {{"f32", UDF_DTYPE_F32, "<f4"}, {"f16", UDF_DTYPE_F16, "<f2"}, {"i8", UDF_DTYPE_I8, "|i1"}};

// Row-major vectors of one element type.
struct Vectors {
  udf_dtype dtype;
  int64_t rows, cols;
  std::vector<std::byte> bytes;

  const std::byte* row(int64_t r) const { return bytes.data() + size_t(r) * cols * udf_dtype_size(dtype); }
  udf_tensor host(int64_t first, int64_t n) const {
    return udf_tensor{const_cast<std::byte*>(row(first)), UDF_HOST_DEVICE, dtype, n, cols, 0};
  }
};

template <class T, class Convert>
void convert_into(const std::vector<float>& src, std::vector<std::byte>& dst, Convert convert) {
  constexpr size_t kBlock = size_t(1) << 20;
  T* out = reinterpret_cast<T*>(dst.data());
  parallel_for(static_cast<int64_t>((src.size() + kBlock - 1) / kBlock), [&](int64_t b) {
    for (size_t i = size_t(b) * kBlock; i < std::min(src.size(), size_t(b + 1) * kBlock); ++i) out[i] = convert(src[i]);
  });
}

Vectors to_elem(const std::vector<float>& src, int64_t cols, const Elem& e) {
  Vectors v{e.dtype, static_cast<int64_t>(src.size()) / cols, cols, std::vector<std::byte>(src.size() * udf_dtype_size(e.dtype))};
  if (e.dtype == UDF_DTYPE_F32)
    std::memcpy(v.bytes.data(), src.data(), v.bytes.size());
  else if (e.dtype == UDF_DTYPE_F16)
    convert_into<_Float16>(src, v.bytes, [](float x) { return static_cast<_Float16>(x); });
  else  // nearbyint: round half to even, as numpy.round
    convert_into<int8_t>(src, v.bytes, [](float x) { return static_cast<int8_t>(std::clamp(std::nearbyint(x * kI8Scale), -127.0f, 127.0f)); });
  return v;
}

// Writes a C-order .npy file, format 1.0: magic, version, header length, a padded dict header.
void write_npy(const std::string& path, const char* descr, const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // (R, C) but (N,)
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // magic + version + length + header + '\n' -> a multiple of 64
  header += '\n';
  const unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xff),
                                      static_cast<unsigned char>(header.size() >> 8)};
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write " + path + ": " + std::strerror(errno));
  const bool ok = std::fwrite(preamble, 1, sizeof preamble, f) == sizeof preamble &&
                  std::fwrite(header.data(), 1, header.size(), f) == header.size() && std::fwrite(data, 1, bytes, f) == bytes;
  if (std::fclose(f) != 0 || !ok) fail("cannot write " + path + ": " + std::strerror(errno));
}

// ---------------------------------------------------------------- measurements

struct MetricChoice {
  const char* elem;
  const char* name;    // as in --metrics
  const char* symbol;  // in the module
  bool weighted;       // takes the `weights` capture
};
constexpr MetricChoice kMetrics[] = {{"f32", "l2", "udf_builtin_l2", false},
                                     {"f32", "weighted_l2", "weighted_l2", true},
                                     {"f16", "l2", "f16_l2", false},
                                     {"i8", "l2", "int8_l2", false},
                                     // L2 as ABI v2 UDFs (test/gpu/metrics_v2/l2_state.cu, l2_vector.cu).
                                     {"f32", "l2_v2_state", "l2_state_f32", false},
                                     {"f32", "l2_v2_vector", "l2_vector_f32", false},
                                     {"f16", "l2_v2_state", "l2_state_f16", false},
                                     {"f16", "l2_v2_vector", "l2_vector_f16", false},
                                     {"i8", "l2_v2_state", "l2_state_i8", false},
                                     {"i8", "l2_v2_vector", "l2_vector_i8", false}};

// The lists' balance (udf_index_list_sizes).  A query probes a list about in proportion to its
// size, so the size of a probed list averages sum(s^2) / sum(s) (probe_weighted), not the mean.
struct ListBalance {
  double mean = 0, probe_weighted = 0, max = 0;  // list sizes (vectors)
};

ListBalance list_balance(const std::vector<uint32_t>& sizes) {
  double sum = 0, squares = 0, max = 0;
  for (const uint32_t s : sizes) {
    sum += s;
    squares += double(s) * s;
    max = std::max(max, double(s));
  }
  if (sizes.empty() || sum == 0) return {};
  return {sum / double(sizes.size()), squares / sum, max};
}

struct Build {
  std::string data, elem, metric, symbol;
  double seconds;
  // Phases, from the progress callback: k-means, assignment, packing + upload.
  double kmeans_s = 0, assign_s = 0, pack_s = 0;
  double balance = 0;  // udf_index_params.balance of the build
  ListBalance lists{};
  // --devices: each shard's device, lists and vectors, and the shards' transport.
  std::vector<udf_shard_info> shards{};
  std::string transport{};
};

// When the build's last "kmeans" and "assign" progress reports came (packing
// and upload follow the assignment).
struct BuildClock {
  std::chrono::steady_clock::time_point t0;
  double kmeans = 0, assign = 0;
  static void report(void* user, double, const char* stage) {
    auto* c = static_cast<BuildClock*>(user);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - c->t0).count();
    if (std::strcmp(stage, "kmeans") == 0) c->kmeans = t;
    if (std::strcmp(stage, "assign") == 0) c->assign = t;
  }
};

struct Row {
  std::string data, elem, metric, symbol, arrays;  // arrays: "host" or "device" (queries and outputs)
  uint32_t batch, probes, k;
  int64_t paths = -1;  // --testing-paths A/B: the row's udf_testing_paths bits (-1: no A/B)
  std::vector<double> samples_ms{};
  double median_ms = 0, p10_ms = 0, p90_ms = 0, qps = 0;
  double recall = NAN;  // NaN: not measured
  int64_t recall_queries = 0;
  double coarse_ms = 0, schedule_ms = 0, scan_ms = 0, merge_ms = 0;  // medians
  // Per query, from udf_index_last_search_work (the last repetition): vectors
  // scored and list bytes the scan read; the scan's bandwidth (median scan time).
  double scored_per_query = 0, list_mb_per_query = 0, scan_gbps = 0;
};

// The q-quantile of `v` (linear interpolation between order statistics, as numpy's default).
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

// Output buffers for batch x k results, on the host or the device.
struct Outputs {
  udf_tensor distances, ids;
};

// 4 warm-up searches of query batch 0 (the runtime's SCAN CHOICE times both of a monotone
// metric's scans, a warm-up and a kept measurement each, in the first four searches of a kind;
// lib/runtime/scan_choice.h), then `reps` timed ones of batches 1 .. reps, each after
// an L2 eviction; fills the row's latency figures.  Then up to 10 more of batches 1 .. with
// the stage times on (udf_index_set_stage_timing: their CUDA events cost a batch-1 search
// several microseconds, so the latency runs go without them) for the stage medians.
template <class QueryBatch>
void time_searches(Driver& drv, udf_index* ix, const udf_search_params& sp, QueryBatch query_batch, const Outputs& out,
                   uint32_t reps, bool warm_l2, Row& row) {
  for (int i = 0; i < 4; ++i) {
    const udf_tensor q = query_batch(0);
    check(udf_index_search(ix, &q, &sp, &out.distances, &out.ids), "udf_index_search (warm-up)");
  }
  std::vector<double> coarse, schedule, scan, merge;
  for (uint32_t r = 1; r <= reps; ++r) {
    const udf_tensor q = query_batch(r);
    if (!warm_l2) drv.evict_l2();
    const auto t0 = std::chrono::steady_clock::now();
    check(udf_index_search(ix, &q, &sp, &out.distances, &out.ids), "udf_index_search");
    row.samples_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  check(udf_index_set_stage_timing(ix, 1), "udf_index_set_stage_timing");
  for (uint32_t r = 1; r <= std::min<uint32_t>(reps, 10); ++r) {
    const udf_tensor q = query_batch(r);
    if (!warm_l2) drv.evict_l2();
    check(udf_index_search(ix, &q, &sp, &out.distances, &out.ids), "udf_index_search (stage times)");
    udf_search_stats st{};
    check(udf_index_last_search_stats(ix, &st), "udf_index_last_search_stats");
    coarse.push_back(st.coarse_ms);
    schedule.push_back(st.schedule_ms);
    scan.push_back(st.scan_ms);
    merge.push_back(st.merge_ms);
  }
  check(udf_index_set_stage_timing(ix, 0), "udf_index_set_stage_timing");
  row.median_ms = quantile(row.samples_ms, 0.5);
  row.p10_ms = quantile(row.samples_ms, 0.1);
  row.p90_ms = quantile(row.samples_ms, 0.9);
  row.qps = row.batch / (row.median_ms / 1e3);
  row.coarse_ms = quantile(coarse, 0.5);
  row.schedule_ms = quantile(schedule, 0.5);
  row.scan_ms = quantile(scan, 0.5);
  row.merge_ms = quantile(merge, 0.5);
  udf_search_work w{};
  check(udf_index_last_search_work(ix, &w), "udf_index_last_search_work");
  row.scored_per_query = double(w.scored) / row.batch;
  row.list_mb_per_query = double(w.list_bytes_read) / row.batch / 1e6;
  row.scan_gbps = row.scan_ms > 0 ? double(w.list_bytes_read) / (row.scan_ms * 1e6) : 0.0;
}

// Ids of the k nearest of the first n evaluation queries (host arrays).
std::vector<int64_t> search_ids(udf_index* ix, udf_search_params sp, const Vectors& eval, int64_t n, uint32_t probes, uint32_t k) {
  sp.n_probes = probes;
  sp.k = k;
  std::vector<float> dist(size_t(n) * k);
  std::vector<int64_t> ids(size_t(n) * k);
  const udf_tensor q = eval.host(0, n);
  const udf_tensor dt{dist.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, n, k, 0}, it{ids.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, n, k, 0};
  check(udf_index_search(ix, &q, &sp, &dt, &it), "udf_index_search (recall)");
  return ids;
}

// |found ∩ reference| / (n k) over the first n rows; padding ids (-1) never count.
double recall(const std::vector<int64_t>& found, const std::vector<int64_t>& reference, int64_t n, uint32_t k) {
  int64_t hits = 0;
  for (int64_t q = 0; q < n; ++q) {
    std::vector<int64_t> ref(reference.begin() + q * k, reference.begin() + (q + 1) * k);
    std::sort(ref.begin(), ref.end());
    for (uint32_t j = 0; j < k; ++j) {
      const int64_t id = found[size_t(q) * k + j];
      hits += id >= 0 && std::binary_search(ref.begin(), ref.end(), id);
    }
  }
  return double(hits) / double(n * k);
}

// ---------------------------------------------------------------- report

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string json_number(double v, const char* fmt = "%.6g") {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "0,1,1": --devices as given.
std::string device_list(const std::vector<int32_t>& devices) {
  std::string out;
  for (const int32_t d : devices) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

// The builds: wall time, phases, udf_index_params.balance and the lists' balance.
void print_builds(const std::vector<Build>& builds) {
  std::printf("| data | elem | metric | build s | k-means | assign | pack + upload | balance | mean list | probe-weighted "
              "| p-w / mean | max / mean |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Build& b : builds)
    std::printf("| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %g | %.1f | %.1f | %.3f | %.3f |\n", b.data.c_str(), b.elem.c_str(),
                b.metric.c_str(), b.seconds, b.kmeans_s, b.assign_s, b.pack_s, b.balance, b.lists.mean, b.lists.probe_weighted,
                b.lists.probe_weighted / b.lists.mean, b.lists.max / b.lists.mean);
  std::printf("\n");
}

// --devices: each index's shards (device, lists, vectors) and transport.
void print_shards(const std::vector<Build>& builds, int32_t home) {
  std::printf("Shards (the top-k of each meet on device %d):\n\n"
              "| data | elem | metric | shard | device | lists | vectors | transport |\n|---|---|---|---:|---:|---|---:|---|\n",
              home);
  for (const Build& b : builds)
    for (size_t i = 0; i < b.shards.size(); ++i)
      std::printf("| %s | %s | %s | %zu | %d | [%u, %u) (%u) | %lld | %s |\n", b.data.c_str(), b.elem.c_str(), b.metric.c_str(), i,
                  b.shards[i].device, b.shards[i].list_begin, b.shards[i].list_end,
                  b.shards[i].list_end - b.shards[i].list_begin, static_cast<long long>(b.shards[i].size), b.transport.c_str());
  std::printf("\n");
}

void print_table(const std::vector<Row>& rows) {
  std::printf("| data | elem | metric | batch | n_probes | k | median ms | p10 | p90 | QPS | recall@k | coarse | schedule | scan | merge ms "
              "| scored / query | list MB / query | scan GB/s |\n"
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::string metric = r.arrays == "host" ? r.metric : r.metric + " (device arrays)";
    if (r.paths >= 0) metric += " [paths " + std::to_string(r.paths) + "]";
    std::printf("| %s | %s | %s | %u | %u | %u | %.3f | %.3f | %.3f | %.0f | %s | %.3f | %.3f | %.3f | %.3f | %.0f | %.2f | %.0f |\n",
                r.data.c_str(), r.elem.c_str(), metric.c_str(), r.batch, r.probes, r.k, r.median_ms, r.p10_ms, r.p90_ms, r.qps,
                std::isnan(r.recall) ? "-" : json_number(r.recall, "%.4f").c_str(), r.coarse_ms, r.schedule_ms, r.scan_ms,
                r.merge_ms, r.scored_per_query, r.list_mb_per_query, r.scan_gbps);
  }
}

// L2 as ABI v2 UDFs next to the v1 l2: for each l2_v2_* row with a v1 l2 row of the same data,
// elem, arrays, batch, n_probes and k, the ratio of the median latencies (printed only when
// such pairs exist).
void print_v2_ratios(const std::vector<Row>& rows) {
  bool header = false;
  for (const Row& r : rows) {
    if (r.metric.rfind("l2_v2_", 0) != 0) continue;
    const auto v1 = std::find_if(rows.begin(), rows.end(), [&](const Row& o) {
      return o.metric == "l2" && o.data == r.data && o.elem == r.elem && o.arrays == r.arrays && o.batch == r.batch &&
             o.probes == r.probes && o.k == r.k;
    });
    if (v1 == rows.end()) continue;
    if (!header) {
      std::printf("\nL2 as ABI v2 UDFs against the v1 l2 (median latency):\n\n"
                  "| data | elem | metric | arrays | batch | n_probes | k | v1 l2 ms | v2 ms | v2 / v1 | v1 scan ms | v2 scan ms |\n"
                  "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
      header = true;
    }
    std::printf("| %s | %s | %s | %s | %u | %u | %u | %.3f | %.3f | %.2f | %.3f | %.3f |\n", r.data.c_str(), r.elem.c_str(),
                r.metric.c_str(), r.arrays.c_str(), r.batch, r.probes, r.k, v1->median_ms, r.median_ms,
                r.median_ms / v1->median_ms, v1->scan_ms, r.scan_ms);
  }
}

template <class T, class Fmt>
std::string json_list(const std::vector<T>& v, Fmt fmt) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + fmt(v[i]);
  return out + "]";
}

// --filters as given: "none" or the symbol and its captures (NAME=INT, ':'-joined).
std::string filters_json(const std::vector<FilterChoice>& filters) {
  std::string out = "[";
  for (size_t i = 0; i < filters.size(); ++i) {
    std::string item = filters[i].symbol.empty() ? "none" : filters[i].symbol;
    for (const auto& [name, value] : filters[i].captures) item += ":" + name + "=" + std::to_string(value);
    out += (i ? ", " : "") + json_string(item);
  }
  return out + "]";
}

void write_json(const std::string& path, const Options& o, const Driver& drv, const std::vector<Build>& builds,
                const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) fail("cannot write " + path + ": " + std::strerror(errno));
  const char* commit = std::getenv("UDF_BENCH_COMMIT");
  const auto str = [](const std::string& s) { return json_string(s); };
  const auto num = [](auto n) { return std::to_string(n); };
  std::string reps;
  for (uint32_t b : o.batches) reps += (reps.empty() ? "" : ", ") + json_string(std::to_string(b)) + ": " + num(o.reps_for(b));
  std::fprintf(f, "{\"kind\": \"search_bench\", \"version\": 1, \"device\": %s, \"driver\": %d, \"commit\": %s,\n",
               json_string(drv.device_name()).c_str(), drv.version(), json_string(commit ? commit : "unknown").c_str());
  std::fprintf(f, " \"rows\": %lld, \"dim\": %lld, \"lists\": %u, \"quick\": %s,\n", static_cast<long long>(o.rows),
               static_cast<long long>(o.dim), o.lists, o.quick ? "true" : "false");
  std::fprintf(f,
               " \"config\": {\"data\": %s, \"elems\": %s, \"metrics\": %s, \"batches\": %s, \"probes\": %s, \"ks\": %s,\n"
               "            \"reps\": {%s}, \"eval_queries\": %lld, \"clusters\": %u, \"many_clusters\": %u, \"sigma\": %g, \"overlap_sigma\": %g, \"many_sigma\": %g,\n"
               "            \"i8_scale\": %g, \"weights\": \"linspace(0.5, 2.0, dim)\", \"evict_bytes\": %zu, \"qpi\": %u, \"balance\": %s, \"mesoclusters\": %u%s, \"testing_paths\": %s, \"path_rounds\": %u, \"max_batch\": %u, \"filters\": %s},\n",
               json_list(o.data, str).c_str(), json_list(o.elems, str).c_str(), json_list(o.metrics, str).c_str(),
               json_list(o.batches, num).c_str(), json_list(o.probes, num).c_str(), json_list(o.ks, num).c_str(), reps.c_str(),
               static_cast<long long>(kEvalQueries), o.clusters_for("clustered"), o.clusters_for("many"), double(kSigma),
               double(o.spread), double(o.many_spread), double(kI8Scale), kEvictBytes, o.qpi, o.balance < 0 ? "null" : json_number(o.balance).c_str(),
               o.mesoclusters, o.devices.empty() ? "" : (", \"devices\": " + json_list(o.devices, num)).c_str(),
               json_list(o.testing_paths, num).c_str(), o.path_rounds, o.max_batch, filters_json(o.filters).c_str());
  std::fprintf(f, " \"builds\": [");
  for (size_t i = 0; i < builds.size(); ++i) {
    // --devices: "transport" and "shards" (each {device, list_begin, list_end, size}).
    std::string shards;
    if (!builds[i].shards.empty()) {
      shards = ", \"transport\": " + str(builds[i].transport) + ", \"shards\": " +
               json_list(builds[i].shards, [](const udf_shard_info& s) {
                 return "{\"device\": " + std::to_string(s.device) + ", \"list_begin\": " + std::to_string(s.list_begin) +
                        ", \"list_end\": " + std::to_string(s.list_end) + ", \"size\": " + std::to_string(s.size) + "}";
               });
    }
    const Build& b = builds[i];
    std::fprintf(f,
                 "%s\n  {\"data\": %s, \"elem\": %s, \"metric\": %s, \"symbol\": %s, \"seconds\": %.3f, \"kmeans_s\": %.3f, "
                 "\"assign_s\": %.3f, \"pack_s\": %.3f, \"balance\": %s, \"list_mean\": %s, \"list_probe_weighted\": %s, "
                 "\"list_max\": %s, \"probe_weighted_over_mean\": %s, \"max_over_mean\": %s%s}",
                 i ? "," : "", str(b.data).c_str(), str(b.elem).c_str(), str(b.metric).c_str(), str(b.symbol).c_str(), b.seconds,
                 b.kmeans_s, b.assign_s, b.pack_s, json_number(b.balance).c_str(), json_number(b.lists.mean, "%.3f").c_str(),
                 json_number(b.lists.probe_weighted, "%.3f").c_str(), json_number(b.lists.max, "%.0f").c_str(),
                 json_number(b.lists.probe_weighted / b.lists.mean, "%.4f").c_str(),
                 json_number(b.lists.max / b.lists.mean, "%.4f").c_str(), shards.c_str());
  }
  std::fprintf(f, "],\n \"results\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n  {\"engine\": \"udf\", \"data\": %s, \"elem\": %s, \"metric\": %s, \"symbol\": %s, \"arrays\": %s, "
                 "\"batch\": %u, \"n_probes\": %u, \"k\": %u, \"reps\": %zu, \"median_ms\": %s, \"p10_ms\": %s, \"p90_ms\": %s, "
                 "\"qps\": %s, \"recall\": %s, \"recall_queries\": %lld, \"coarse_ms\": %s, \"schedule_ms\": %s, \"scan_ms\": %s, "
                 "\"merge_ms\": %s, \"scored_per_query\": %s, \"list_mb_per_query\": %s, \"scan_gbps\": %s, \"samples_ms\": %s%s}",
                 i ? "," : "", str(r.data).c_str(), str(r.elem).c_str(), str(r.metric).c_str(), str(r.symbol).c_str(),
                 str(r.arrays).c_str(), r.batch, r.probes, r.k, r.samples_ms.size(), json_number(r.median_ms).c_str(),
                 json_number(r.p10_ms).c_str(), json_number(r.p90_ms).c_str(), json_number(r.qps, "%.1f").c_str(),
                 json_number(r.recall, "%.6f").c_str(), static_cast<long long>(r.recall_queries), json_number(r.coarse_ms).c_str(),
                 json_number(r.schedule_ms).c_str(), json_number(r.scan_ms).c_str(), json_number(r.merge_ms).c_str(),
                 json_number(r.scored_per_query, "%.1f").c_str(), json_number(r.list_mb_per_query, "%.4f").c_str(),
                 json_number(r.scan_gbps, "%.1f").c_str(), json_list(r.samples_ms, [](double v) { return json_number(v); }).c_str(),
                 r.paths >= 0 ? (", \"testing_paths\": " + std::to_string(r.paths)).c_str() : "");
  }
  std::fprintf(f, "\n]}\n");
  if (std::fclose(f) != 0) fail("cannot write " + path + ": " + std::strerror(errno));
}

// The vectors of one (data set, element type): what its metrics' indexes share.
struct DataSet {
  std::string name;  // clustered, overlap, many or uniform
  Vectors base, eval;                  // eval: the recall queries
  std::map<uint32_t, Vectors> pools;   // batch -> reps + 1 query batches (0: warm-up)
  std::string dump_prefix;             // DIR/DATA_ELEM, or "" without --dump-dir
  std::string elem;                    // f32, f16 or i8
};

// The (elem, metric) pairs to run: asked for, and in the module.
std::vector<MetricChoice> plan_metrics(const Options& o, udf_module* m) {
  std::vector<MetricChoice> plan;
  for (const Elem& e : kElems) {
    if (std::find(o.elems.begin(), o.elems.end(), e.name) == o.elems.end()) continue;
    for (const std::string& name : o.metrics) {
      const MetricChoice* c = std::find_if(std::begin(kMetrics), std::end(kMetrics), [&](const MetricChoice& mc) {
        return mc.elem == std::string(e.name) && mc.name == name;
      });
      size_t index = 0;
      if (c == std::end(kMetrics))
        std::fprintf(stderr, "search_bench: note: no %s metric for %s elements; skipped\n", name.c_str(), e.name);
      else if (udf_module_find_metric(m, c->symbol, &index) != UDF_OK)
        std::fprintf(stderr, "search_bench: note: %s has no metric %s (%s %s); skipped\n", o.module.c_str(), c->symbol, e.name,
                     name.c_str());
      else
        plan.push_back(*c);
    }
  }
  for (const uint32_t probes : o.probes)
    if (probes > o.lists) std::fprintf(stderr, "search_bench: note: n_probes %u is above --lists %u; skipped\n", probes, o.lists);
  return plan;
}

// Host arrays in and out, every batch x n_probes x k of the grid, with recall.
void bench_host_arrays(const Options& o, Driver& drv, udf_index* ix, udf_search_params sp, uint32_t max_k, const DataSet& ds,
                       Row proto, std::vector<Row>& rows) {
  for (const uint32_t k : o.ks) {
    if (k > max_k) {
      std::fprintf(stderr, "search_bench: note: k %u is above %s's max_k %u; skipped\n", k, proto.symbol.c_str(), max_k);
      continue;
    }
    const std::vector<int64_t> reference = search_ids(ix, sp, ds.eval, kEvalQueries, o.lists, k);
    if (!ds.dump_prefix.empty())
      write_npy(ds.dump_prefix + "_" + proto.metric + "_ref_k" + std::to_string(k) + ".npy", "<i8", {kEvalQueries, int64_t(k)},
                reference.data(), reference.size() * sizeof(int64_t));
    for (const uint32_t batch : o.batches) {
      std::vector<float> dist_out(size_t(batch) * k);
      std::vector<int64_t> ids_out(size_t(batch) * k);
      const Outputs out{{dist_out.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, batch, k, 0},
                        {ids_out.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, batch, k, 0}};
      const Vectors& pool = ds.pools.at(batch);
      for (const uint32_t probes : o.probes) {
        if (probes > o.lists) continue;  // noted by plan_metrics
        // One row; with a --testing-paths A/B, under `paths` (-1: no A/B).
        auto cell = [&](int64_t paths) {
          Row row = proto;
          row.batch = batch;
          row.probes = sp.n_probes = probes;
          row.k = sp.k = k;
          row.paths = paths;
          if (paths >= 0) check(udf_testing_paths(static_cast<uint32_t>(paths)), "udf_testing_paths");
          time_searches(drv, ix, sp, [&](uint32_t r) { return pool.host(int64_t(r) * batch, batch); }, out, o.reps_for(batch),
                        o.warm_l2, row);
          if (!o.results_dir.empty()) {
            const std::string name = o.results_dir + "/" + ds.name + "_" + ds.elem + "_" + proto.metric + "_b" +
                                     std::to_string(batch) + "_p" + std::to_string(probes) + "_k" + std::to_string(k);
            write_npy(name + "_dist.npy", "<f4", {int64_t(batch), int64_t(k)}, dist_out.data(), dist_out.size() * sizeof(float));
            write_npy(name + "_ids.npy", "<i8", {int64_t(batch), int64_t(k)}, ids_out.data(), ids_out.size() * sizeof(int64_t));
          }
          row.recall_queries = std::min<int64_t>(batch, kEvalQueries);
          row.recall = recall(search_ids(ix, sp, ds.eval, row.recall_queries, probes, k), reference, row.recall_queries, k);
          if (paths >= 0) check(udf_testing_paths(0), "udf_testing_paths");
          rows.push_back(std::move(row));
        };
        if (!o.path_ab()) {
          cell(-1);
          continue;
        }
        for (uint32_t round = 0; round < o.path_rounds; ++round)
          for (const uint32_t paths : o.testing_paths) cell(paths);
      }
    }
  }
}

// Device arrays in and out (queries uploaded beforehand), n_probes 32, k 10: the search without host copies.
void bench_device_arrays(const Options& o, Driver& drv, udf_index* ix, udf_search_params sp, const DataSet& ds, Row proto,
                         std::vector<Row>& rows) {
  constexpr uint32_t kProbes = 32, kK = 10;
  const auto as_ptr = [](Driver::CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  for (const uint32_t batch : o.batches) {
    const Vectors& pool = ds.pools.at(batch);
    const Driver::CUdeviceptr queries = drv.upload(pool.bytes.data(), pool.bytes.size());
    const Driver::CUdeviceptr dist = drv.alloc(size_t(batch) * kK * sizeof(float));
    const Driver::CUdeviceptr ids = drv.alloc(size_t(batch) * kK * sizeof(int64_t));
    const int32_t dev = drv.ordinal();  // the index's home device
    const Outputs out{{as_ptr(dist), dev, UDF_DTYPE_F32, batch, kK, 0}, {as_ptr(ids), dev, UDF_DTYPE_I64, batch, kK, 0}};
    const size_t batch_bytes = size_t(batch) * o.dim * udf_dtype_size(pool.dtype);
    Row row = proto;
    row.arrays = "device";
    row.batch = batch;
    row.probes = sp.n_probes = std::min(kProbes, o.lists);
    row.k = sp.k = kK;
    time_searches(drv, ix, sp, [&](uint32_t r) { return udf_tensor{as_ptr(queries + r * batch_bytes), dev, pool.dtype, batch, o.dim, 0}; },
                  out, o.reps_for(batch), o.warm_l2, row);
    rows.push_back(std::move(row));
    drv.release(queries);
    drv.release(dist);
    drv.release(ids);
  }
}

// Each shard's device, lists and vectors (udf_index_shard_info).
std::vector<udf_shard_info> shard_plan(const udf_index* ix) {
  size_t n = 0;
  check(udf_index_shard_count(ix, &n), "udf_index_shard_count");
  std::vector<udf_shard_info> plan(n);
  for (size_t i = 0; i < n; ++i) check(udf_index_shard_info(ix, i, &plan[i]), "udf_index_shard_info");
  return plan;
}

// The balance of the index's lists.
ListBalance measure_lists(const udf_index* ix) {
  udf_index_info info{};
  check(udf_index_info_get(ix, &info), "udf_index_info_get");
  std::vector<uint32_t> sizes(info.n_lists);
  check(udf_index_list_sizes(ix, sizes.data(), sizes.size()), "udf_index_list_sizes");
  return list_balance(sizes);
}

// Builds the metric's index over the data set (timed) and measures its searches.  `shards`: empty
// for a one-GPU index (on m's device), else the module of each --devices entry (m is the first's):
// the index is sharded over them.
void bench_metric(const Options& o, Driver& drv, udf_module* m, const std::vector<udf_module*>& shards, const DataSet& ds,
                  const MetricChoice& c, const udf_capture_binding& weights, std::vector<Build>& builds,
                  std::vector<Row>& rows) {
  udf_index_params ip;
  udf_index_params_default(&ip);
  ip.n_lists = o.lists;
  if (o.balance >= 0) ip.balance = o.balance;
  ip.kmeans_mesoclusters = o.mesoclusters;
  const udf_tensor data = ds.base.host(0, o.rows);
  udf_index* ix = nullptr;
  std::fprintf(stderr, "search_bench: building %s %s %s\n", ds.name.c_str(), c.elem, c.name);
  BuildClock clock;
  ip.progress = BuildClock::report;
  ip.progress_user = &clock;
  clock.t0 = std::chrono::steady_clock::now();
  if (shards.empty())
    check(udf_index_build(m, c.symbol, &data, nullptr, &ip, &ix), "udf_index_build");
  else {
    ip.shard_layout = o.shard_layout;
    check(udf_index_build_sharded(shards.data(), shards.size(), c.symbol, &data, nullptr, &ip, &ix), "udf_index_build_sharded");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock.t0).count();
  Build build{ds.name, c.elem, c.name, c.symbol, seconds, clock.kmeans, clock.assign - clock.kmeans, seconds - clock.assign,
              ip.balance, measure_lists(ix)};
  std::fprintf(stderr, "search_bench: balance %g: mean list %.1f, probe-weighted %.1f (x %.3f), largest %.0f (x %.3f)\n",
               build.balance, build.lists.mean, build.lists.probe_weighted, build.lists.probe_weighted / build.lists.mean,
               build.lists.max, build.lists.max / build.lists.mean);
  if (!shards.empty()) {
    build.shards = shard_plan(ix);
    const char* transport = udf_index_shard_transport(ix);
    build.transport = transport ? transport : "?";
    for (size_t i = 0; i < build.shards.size(); ++i)
      std::fprintf(stderr, "search_bench: shard %zu (by %s): device %d, lists [%u, %u), %lld vectors\n", i,
                   build.shards[i].layout == UDF_SHARD_BY_VECTORS ? "vectors" : "lists", build.shards[i].device,
                   build.shards[i].list_begin, build.shards[i].list_end, static_cast<long long>(build.shards[i].size));
    std::fprintf(stderr, "search_bench: shard transport: %s\n", build.transport.c_str());
  }
  builds.push_back(std::move(build));

  size_t metric_index = 0;
  udf_metric_info info{};
  check(udf_module_find_metric(m, c.symbol, &metric_index), "udf_module_find_metric");
  check(udf_module_metric_info(m, metric_index, &info), "udf_module_metric_info");
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.queries_per_item = o.qpi;
  sp.max_batch = o.max_batch;
  sp.captures = c.weighted ? &weights : nullptr;
  sp.n_captures = c.weighted ? 1 : 0;
  const Row proto{ds.name, c.elem, c.name, c.symbol, "host", 0, 0, 0};
  for (const FilterChoice& f : o.filters) {
    udf_search_params fp = sp;
    Row fproto = proto;
    std::vector<udf_capture_binding> fcaps;
    if (!f.symbol.empty()) {
      size_t filter_index = 0;
      check(udf_module_find_filter(m, f.symbol.c_str(), &filter_index), "udf_module_find_filter");
      for (const auto& [name, value] : f.captures) fcaps.push_back(udf_capture_binding{name.c_str(), nullptr, 0, value});
      fp.filter = f.symbol.c_str();
      fp.filter_captures = fcaps.empty() ? nullptr : fcaps.data();
      fp.n_filter_captures = fcaps.size();
      fproto.metric += "+" + f.symbol;
    }
    bench_host_arrays(o, drv, ix, fp, info.max_k, ds, fproto, rows);
  }
  if (c.elem == std::string("f32") && !c.weighted) bench_device_arrays(o, drv, ix, sp, ds, proto, rows);
  udf_index_destroy(ix);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  if (!o.path_ab() && o.testing_paths[0]) check(udf_testing_paths(o.testing_paths[0]), "udf_testing_paths");
  // One runtime per distinct device, the module loaded by each; the first listed (or 0) is the
  // home: the Driver's context, device arrays.  With --devices, shards[i] is the module of the
  // i-th listed device (a device listed twice gives its module twice).
  const std::vector<int32_t> listed = o.devices.empty() ? std::vector<int32_t>{0} : o.devices;
  std::vector<int32_t> distinct;
  for (const int32_t d : listed)
    if (std::find(distinct.begin(), distinct.end(), d) == distinct.end()) distinct.push_back(d);
  std::vector<udf_runtime*> runtimes(distinct.size(), nullptr);
  std::vector<udf_module*> modules(distinct.size(), nullptr);
  for (size_t i = 0; i < distinct.size(); ++i)
    check(udf_runtime_create(distinct[i], &runtimes[i]),
          o.devices.empty() ? "udf_runtime_create" : ("udf_runtime_create(" + std::to_string(distinct[i]) + ")").c_str());
  Driver drv(listed.front());
  for (size_t i = 1; i < distinct.size(); ++i) drv.add_peer(distinct[i]);
  for (size_t i = 0; i < distinct.size(); ++i)
    check(udf_module_load_file(runtimes[i], o.module.c_str(), &modules[i]), "udf_module_load_file");
  udf_module* m = modules.front();
  std::vector<udf_module*> shards;
  for (const int32_t d : o.devices) shards.push_back(modules[std::find(distinct.begin(), distinct.end(), d) - distinct.begin()]);
  const std::vector<MetricChoice> plan = plan_metrics(o, m);

  std::vector<float> weights(o.dim);  // linspace(0.5, 2.0)
  for (int64_t j = 0; j < o.dim; ++j) weights[j] = 0.5f + 1.5f * float(j) / float(std::max<int64_t>(o.dim - 1, 1));
  const udf_tensor weights_tensor{weights.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, 1, o.dim, 0};
  const udf_capture_binding weights_binding{"weights", &weights_tensor, 0, 0};
  auto make_dir = [](const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail("cannot create " + dir + ": " + ec.message());
  };
  if (!o.dump_dir.empty()) {
    make_dir(o.dump_dir);
    write_npy(o.dump_dir + "/weights.npy", "<f4", {o.dim}, weights.data(), weights.size() * sizeof(float));
  }
  if (!o.results_dir.empty()) make_dir(o.results_dir);

  std::vector<Build> builds;
  std::vector<Row> rows;
  for (const std::string& data_name : o.data) {
    const Distribution::Kind kind = data_name == "uniform"     ? Distribution::kUniform
                                    : data_name == "clustered" ? Distribution::kClustered
                                    : data_name == "overlap"   ? Distribution::kOverlap
                                                               : Distribution::kMany;
    const float sigma = kind == Distribution::kOverlap ? o.spread : kind == Distribution::kMany ? o.many_spread : kSigma;
    const Distribution dist(kind, sigma, o.dim, o.clusters_for(data_name));
    const std::string mixture = kind == Distribution::kUniform ? ""
                                : " (" + std::to_string(o.clusters_for(data_name)) + " clusters, spread " + json_number(sigma) + ")";
    std::fprintf(stderr, "search_bench: generating %s data, %lld x %lld%s\n", data_name.c_str(), static_cast<long long>(o.rows),
                 static_cast<long long>(o.dim), mixture.c_str());
    const std::vector<float> base = dist.draw(o.rows, Distribution::kBaseStream);
    const std::vector<float> eval = dist.draw(kEvalQueries, Distribution::kEvalStream);
    std::vector<std::vector<float>> pools;  // per batch size
    for (size_t i = 0; i < o.batches.size(); ++i)
      pools.push_back(dist.draw(int64_t(o.batches[i]) * (o.reps_for(o.batches[i]) + 1), Distribution::kPoolStream + uint32_t(i)));

    for (const Elem& e : kElems) {
      if (std::none_of(plan.begin(), plan.end(), [&](const MetricChoice& c) { return c.elem == std::string(e.name); })) continue;
      DataSet ds{data_name, to_elem(base, o.dim, e), to_elem(eval, o.dim, e), {},
                 o.dump_dir.empty() ? "" : o.dump_dir + "/" + data_name + "_" + e.name, e.name};
      for (size_t i = 0; i < o.batches.size(); ++i) ds.pools.emplace(o.batches[i], to_elem(pools[i], o.dim, e));
      if (!ds.dump_prefix.empty()) {
        write_npy(ds.dump_prefix + "_base.npy", e.npy_descr, {o.rows, o.dim}, ds.base.bytes.data(), ds.base.bytes.size());
        write_npy(ds.dump_prefix + "_queries.npy", e.npy_descr, {kEvalQueries, o.dim}, ds.eval.bytes.data(), ds.eval.bytes.size());
      }
      for (const MetricChoice& c : plan)
        if (c.elem == std::string(e.name)) bench_metric(o, drv, m, shards, ds, c, weights_binding, builds, rows);
    }
  }

  std::printf("search_bench: %s, driver %d, %lld x %lld, %u lists%s\n\n", drv.device_name().c_str(), drv.version(),
              static_cast<long long>(o.rows), static_cast<long long>(o.dim), o.lists,
              o.devices.empty() ? "" : (", sharded over devices " + device_list(o.devices)).c_str());
  print_builds(builds);
  if (!o.devices.empty()) print_shards(builds, listed.front());
  print_table(rows);
  print_v2_ratios(rows);
  if (!o.json_path.empty()) write_json(o.json_path, o, drv, builds, rows);
  for (udf_module* mod : modules) udf_module_destroy(mod);
  for (udf_runtime* rt : runtimes) udf_runtime_destroy(rt);
  return 0;
}
