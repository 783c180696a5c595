// Helpers shared by the runtime's GPU tests (runtime_gpu_test.cpp,
// runtime_api_fuzz_test.cpp, runtime_device_array_test.cpp, ...): the
// process's runtime (or why there is none), device memory through the driver, random data in every element type with
// its float64 view, a poisoned search (plain or filtered), and the exact-result check against a
// float64 brute force.  Each test binary includes it once.
#pragma once
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "udf/runtime.h"
#include "udf/runtime.hpp"

// The path hook for tests (libudf_runtime.so, not in runtime.h;
// docs/runtime.md): paths that give the default's results, chosen by the
// tests that compare them bit for bit.  Process-wide; 0 is the default.
extern "C" udf_status udf_testing_paths(uint32_t paths);

namespace {

// udf_testing_paths bits (index/testing_paths.h).
constexpr uint32_t kPathPlainScan = 1;          // a monotone metric's plain scan everywhere
constexpr uint32_t kPathPruningScan = 2;        // its pruning scan everywhere
constexpr uint32_t kPathNoNearFirst = 4;        // a pruning scan's list-major schedule in the plain order
constexpr uint32_t kPathNoTailMerge = 8;        // direct schedules merge with the merge kernel
constexpr uint32_t kPathNoQueryBound = 16;      // scans get no query bounds
constexpr uint32_t kPathRestageRows = 32;       // a build copies its rows again for the placement
constexpr uint32_t kPathKeysAssign = 64;        // a build's nearest lists from the coarse keys and selection
constexpr uint32_t kPathNoPeerReads = 128;      // a sharded build's placement reads no other device's memory
constexpr uint32_t kPathNoTile = 256;           // exact search folds no item as a tile
constexpr uint32_t kPathNoCoarseShare = 512;    // a sharded search's devices each probe the whole batch
constexpr uint32_t kPathPlainSelect = 1024;     // a batch's probes selected by the select kernel only
constexpr uint32_t kPathNoSharedStaging = 2048;  // a sharded search's devices each stage their host queries
constexpr uint32_t kPathNarrowNearest = 4096;   // a build's nearest lists by the 64-centroid kernel
constexpr uint32_t kPathFirstUnknown = kPathNarrowNearest << 1;  // refused: no path has it

std::string module_dir() {
  if (const char* e = std::getenv("UDF_TEST_MODULE_DIR")) return e;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    std::string exe(buf, static_cast<size_t>(n));
    std::string d = exe.substr(0, exe.rfind('/')) + "/modules";
    if (std::ifstream(d + "/builtin.udfm").good()) return d;
  }
  return UDF_TEST_MODULE_DIR;
}

// The test artifacts (.udfa): $UDF_TEST_ARTIFACT_DIR, else runtime_artifacts
// beside the modules (the build tree), else artifacts/ there (.device/).
[[maybe_unused]] std::string artifact_dir() {
  if (const char* e = std::getenv("UDF_TEST_ARTIFACT_DIR")) return e;
  const std::string parent = module_dir() + "/..";
  for (const char* d : {"/runtime_artifacts", "/artifacts"})
    if (std::ifstream(parent + d + "/weighted_l2.udfa").good()) return parent + d;
  return parent + "/runtime_artifacts";
}

// The kernel pack udf_module_link_ex links with: $UDF_KERNEL_PACK_DIR, else
// share/udf/kernels of the build tree, else kernels/ beside the modules (.device/).
[[maybe_unused]] std::string kernel_pack_dir() {
  if (const char* e = std::getenv("UDF_KERNEL_PACK_DIR")) return e;
  for (const std::string& d : {module_dir() + "/../../share/udf/kernels", module_dir() + "/../kernels"})
    if (std::ifstream(d + "/ivf_flat_v1.json").good()) return d;
  return module_dir() + "/../kernels";
}

// Run-time link options for a test: the defaults, linking with the kernel
// pack `pack` and caching in `cache` (strings the caller keeps while it links).
[[maybe_unused]] udf_link_options link_options(const std::string& cache, const std::string& pack) {
  udf_link_options o;
  udf_link_options_default(&o);
  o.cache_dir = cache.c_str();
  o.kernel_pack_dir = pack.c_str();
  return o;
}

// Sets an environment variable for a scope and restores what it was.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* e = std::getenv(name.c_str())) old = e;
    setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old) setenv(name.c_str(), old->c_str(), 1);
    else unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

// One runtime for the whole binary (or the reason there is none).
struct Gpu {
  udf_runtime* rt = nullptr;
  std::string reason;
  udf_status status = UDF_OK;
};
Gpu& gpu() {
  static Gpu g = [] {
    Gpu x;
    x.status = udf_runtime_create(0, &x.rt);
    if (x.status != UDF_OK) x.reason = std::string(udf_status_name(x.status)) + ": " + udf_last_error();
    return x;
  }();
  return g;
}
#define REQUIRE_GPU()                                                        \
  if (!gpu().rt) GTEST_SKIP() << "no usable CUDA GPU: " << gpu().reason; \
  else (void)0

// The driver calls the tests make themselves (device memory for device-side
// tensors, streams, free memory), through the driver directly.  The
// constructor makes the device's primary context current on the thread that
// first uses it; use() does that on any other thread.
struct Cu {
  decltype(&::cuMemAlloc) alloc;
  decltype(&::cuMemFree) free;
  decltype(&::cuMemcpyHtoD) htod;
  decltype(&::cuMemcpyDtoH) dtoh;
  decltype(&::cuDevicePrimaryCtxRetain) retain;
  decltype(&::cuCtxSetCurrent) set;
  decltype(&::cuDeviceGet) get;
  decltype(&::cuMemGetInfo) mem_info;
  decltype(&::cuStreamCreate) stream_create;
  decltype(&::cuStreamSynchronize) stream_sync;
  decltype(&::cuStreamDestroy) stream_destroy;
  decltype(&::cuLaunchHostFunc) host_func;
  decltype(&::cuMemcpyHtoDAsync) htod_async;
  CUcontext ctx = nullptr;
  Cu() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    alloc = reinterpret_cast<decltype(alloc)>(dlsym(h, "cuMemAlloc_v2"));
    free = reinterpret_cast<decltype(free)>(dlsym(h, "cuMemFree_v2"));
    htod = reinterpret_cast<decltype(htod)>(dlsym(h, "cuMemcpyHtoD_v2"));
    dtoh = reinterpret_cast<decltype(dtoh)>(dlsym(h, "cuMemcpyDtoH_v2"));
    retain = reinterpret_cast<decltype(retain)>(dlsym(h, "cuDevicePrimaryCtxRetain"));
    set = reinterpret_cast<decltype(set)>(dlsym(h, "cuCtxSetCurrent"));
    get = reinterpret_cast<decltype(get)>(dlsym(h, "cuDeviceGet"));
    mem_info = reinterpret_cast<decltype(mem_info)>(dlsym(h, "cuMemGetInfo_v2"));
    stream_create = reinterpret_cast<decltype(stream_create)>(dlsym(h, "cuStreamCreate"));
    stream_sync = reinterpret_cast<decltype(stream_sync)>(dlsym(h, "cuStreamSynchronize"));
    stream_destroy = reinterpret_cast<decltype(stream_destroy)>(dlsym(h, "cuStreamDestroy_v2"));
    host_func = reinterpret_cast<decltype(host_func)>(dlsym(h, "cuLaunchHostFunc"));
    htod_async = reinterpret_cast<decltype(htod_async)>(dlsym(h, "cuMemcpyHtoDAsync_v2"));
    CUdevice d;
    get(&d, 0);
    retain(&ctx, d);
    set(ctx);
  }
  static Cu& I() {
    static Cu c;
    return c;
  }
  void use() const { set(ctx); }
};
struct DevMem {
  CUdeviceptr p = 0;
  explicit DevMem(size_t n) { EXPECT_EQ(Cu::I().alloc(&p, n), CUDA_SUCCESS); }
  DevMem(const void* src, size_t n) : DevMem(n) { EXPECT_EQ(Cu::I().htod(p, src, n), CUDA_SUCCESS); }
  ~DevMem() { Cu::I().free(p); }
  void* ptr() const { return reinterpret_cast<void*>(p); }
};

uint16_t f32_to_f16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t m = x & 0x7FFFFFu;
  if (e <= 0) return static_cast<uint16_t>(sign);  // tests use |x| >= 2^-14 or 0
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (m >> 13);
  const uint32_t rest = m & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}
double f16_to_f64(uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// A dataset in one element type, with its float64 view.
struct Data {
  udf_dtype dtype = UDF_DTYPE_F32;
  int64_t rows = 0, dim = 0;
  std::vector<uint8_t> bytes;
  std::vector<double> v;  // the values the GPU sees
  udf_tensor tensor() const { return udf::tensor(bytes.data(), dtype, rows, dim); }
  // Rows [r0, r0 + n) as a Data of their own.
  Data rows_of(int64_t r0, int64_t n) const {
    const size_t row_bytes = size_t(dim) * udf_dtype_size(dtype);
    Data d;
    d.dtype = dtype;
    d.rows = n;
    d.dim = dim;
    d.bytes.assign(bytes.begin() + r0 * row_bytes, bytes.begin() + (r0 + n) * row_bytes);
    if (!v.empty()) d.v.assign(v.begin() + r0 * dim, v.begin() + (r0 + n) * dim);
    return d;
  }
};

[[maybe_unused]] Data make_data(std::mt19937_64& rng, udf_dtype t, int64_t rows, int64_t dim, int clusters = 0,
                 const std::vector<double>* centers = nullptr) {
  Data d;
  d.dtype = t;
  d.rows = rows;
  d.dim = dim;
  d.bytes.resize(rows * dim * udf_dtype_size(t));
  d.v.resize(rows * dim);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> pick(0, std::max(0, clusters - 1));
  for (int64_t r = 0; r < rows; ++r) {
    const int c = clusters ? pick(rng) : 0;
    for (int64_t j = 0; j < dim; ++j) {
      const size_t i = r * dim + j;
      double x = nd(rng) * (clusters ? 0.3 : 1.0) + (centers ? (*centers)[c * dim + j] : 0.0);
      switch (t) {
        case UDF_DTYPE_F32: {
          float f = static_cast<float>(x);
          std::memcpy(&d.bytes[i * 4], &f, 4);
          d.v[i] = f;
          break;
        }
        case UDF_DTYPE_F16: {
          uint16_t h = f32_to_f16(static_cast<float>(x));
          std::memcpy(&d.bytes[i * 2], &h, 2);
          d.v[i] = f16_to_f64(h);
          break;
        }
        case UDF_DTYPE_I8: {
          int8_t q = static_cast<int8_t>(std::clamp<long>(std::lround(x * 40), -127, 127));
          d.bytes[i] = static_cast<uint8_t>(q);
          d.v[i] = q;
          break;
        }
        default: {
          uint8_t q = static_cast<uint8_t>(std::clamp<long>(std::lround(128 + x * 40), 0, 255));
          d.bytes[i] = q;
          d.v[i] = q;
          break;
        }
      }
    }
  }
  return d;
}

uint64_t fresh_seed() { return std::random_device{}() ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()); }

using RefFn = std::function<double(const double* x, const double* y, int64_t dim)>;

// A weighted-L2 metric's weights: dim values drawn uniform in [lo, hi) and
// rounded to f32 (w, what the GPU gets), their f64 values (wd, what the
// references use), and the float64 reference sum_i wd[i] (x_i - y_i)^2.
struct Weights {
  std::vector<float> w;
  std::vector<double> wd;
  Weights(std::mt19937_64& rng, int64_t dim, double lo, double hi) : w(dim), wd(dim) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < dim; ++i) wd[i] = w[i] = static_cast<float>(u(rng));
  }
  double l2(const double* x, const double* y, int64_t n) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += wd[i] * (x[i] - y[i]) * (x[i] - y[i]);
    return s;
  }
  RefFn l2_ref() const {
    return [this](const double* x, const double* y, int64_t n) { return l2(x, y, n); };
  }
};

struct Result {
  std::vector<float> dist;
  std::vector<int64_t> ids;
};

// Searches `q` with `p` (k and the rest set by the caller) into `r`, whose
// outputs are poisoned first.
udf_status search_with(udf_index* ix, const Data& q, const udf_search_params& p, Result& r) {
  const uint32_t k = p.k;
  r.dist.assign(q.rows * k, std::numeric_limits<float>::quiet_NaN());  // poison
  r.ids.assign(q.rows * k, static_cast<int64_t>(0x5A5A5A5A5A5A5A5A));
  udf_tensor qt = q.tensor();
  udf_tensor od = udf::tensor(r.dist.data(), UDF_DTYPE_F32, q.rows, k);
  udf_tensor oi = udf::tensor(r.ids.data(), UDF_DTYPE_I64, q.rows, k);
  return udf_index_search(ix, &qt, &p, &od, &oi);
}

udf_search_params search_params(uint32_t k, uint32_t probes, uint32_t max_batch, uint32_t qpi) {
  udf_search_params p;
  udf_search_params_default(&p);
  p.k = k;
  p.n_probes = probes;
  p.max_batch = max_batch;
  p.queries_per_item = qpi;
  return p;
}

[[maybe_unused]] udf_status search(udf_index* ix, const Data& q, uint32_t k, uint32_t probes, Result& r,
                  const std::vector<udf_capture_binding>& caps = {}, uint32_t max_batch = 0, uint32_t qpi = 0) {
  udf_search_params p = search_params(k, probes, max_batch, qpi);
  p.captures = caps.data();
  p.n_captures = caps.size();
  return search_with(ix, q, p, r);
}

// A search through the module's filter `filter` with its captures `fcaps`.
[[maybe_unused]] udf_status search_filtered(udf_index* ix, const Data& q, uint32_t k, uint32_t probes, Result& r,
                                            const char* filter, const std::vector<udf_capture_binding>& fcaps,
                                            uint32_t max_batch = 0, uint32_t qpi = 0) {
  udf_search_params p = search_params(k, probes, max_batch, qpi);
  p.filter = filter;
  p.filter_captures = fcaps.data();
  p.n_filter_captures = fcaps.size();
  return search_with(ix, q, p, r);
}

// Every query's k results against the float64 brute force over all vectors:
// the i-th distance equals the i-th reference distance, every id's own
// reference distance equals the reported one, ids are distinct (ties may
// reorder equal distances).
[[maybe_unused]] void expect_exact(const Data& base, const Data& q, const Result& r, uint32_t k, bool max_order, const RefFn& ref,
                  double rel_tol, const std::vector<double>* weights = nullptr) {
  int bad = 0;
  for (int64_t qi = 0; qi < q.rows && bad < 5; ++qi) {
    std::vector<double> all(base.rows);
    for (int64_t i = 0; i < base.rows; ++i) all[i] = ref(&base.v[i * base.dim], &q.v[qi * q.dim], base.dim);
    std::vector<double> sorted = all;
    if (max_order)
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
    else
      std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> seen;
    for (uint32_t i = 0; i < k; ++i) {
      const float d = r.dist[qi * k + i];
      const int64_t id = r.ids[qi * k + i];
      if (i >= base.rows) {
        if (id != -1) ++bad;
        continue;
      }
      const double want = sorted[i];
      const double tol = rel_tol * (1.0 + std::fabs(want));
      if (!(std::fabs(d - want) <= tol) || id < 0 || id >= base.rows || !(std::fabs(all[id] - d) <= tol) ||
          std::find(seen.begin(), seen.end(), id) != seen.end()) {
        ADD_FAILURE() << "query " << qi << " rank " << i << ": got (" << d << ", id " << id << "), want distance " << want
                      << (id >= 0 && id < base.rows ? " (that id's distance: " + std::to_string(all[id]) + ")" : "");
        ++bad;
        break;
      }
      seen.push_back(id);
    }
  }
  EXPECT_EQ(bad, 0);
}

// An index of `d` with n_lists lists (a fresh k-means seed); the build is
// expected to succeed (null, and a test failure, if it does not).
[[maybe_unused]] udf_index* build_index(udf_module* m, const char* metric, const Data& d, uint32_t n_lists,
                                        double balance = 2.0, uint32_t iters = 10) {
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = n_lists;
  p.kmeans_iters = iters;
  p.balance = balance;
  p.seed = std::random_device{}();
  udf_tensor t = d.tensor();
  udf_index* ix = nullptr;
  EXPECT_EQ(udf_index_build(m, metric, &t, nullptr, &p, &ix), UDF_OK) << udf_last_error();
  return ix;
}

// The modules every GPU test may use (loaded when there is a GPU) and the
// test's random source, from a fresh seed.
struct Fixture : ::testing::Test {
  std::mt19937_64 rng{fresh_seed()};
  udf_module* builtin = nullptr;
  udf_module* udfs = nullptr;
  udf_module* ir_mlir = nullptr;  // examples/*.mlir through udfc's MLIR front end
  udf_module* ir_ll = nullptr;    // examples/*.ll through udfc's LLVM IR front end
  void SetUp() override {
    if (!gpu().rt) return;
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/builtin.udfm").c_str(), &builtin), UDF_OK)
        << udf_last_error();
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/udfs.udfm").c_str(), &udfs), UDF_OK) << udf_last_error();
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/ir_mlir.udfm").c_str(), &ir_mlir), UDF_OK)
        << udf_last_error();
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/ir_ll.udfm").c_str(), &ir_ll), UDF_OK) << udf_last_error();
  }
  void TearDown() override {
    udf_module_destroy(builtin);
    udf_module_destroy(udfs);
    udf_module_destroy(ir_mlir);
    udf_module_destroy(ir_ll);
  }
  udf_module* module(const std::string& name) const {
    if (name == "builtin") return builtin;
    if (name == "ir_mlir") return ir_mlir;
    if (name == "ir_ll") return ir_ll;
    return udfs;
  }
  udf_index* build(udf_module* m, const char* metric, const Data& d, uint32_t n_lists, double balance = 2.0,
                   uint32_t iters = 10) {
    return build_index(m, metric, d, n_lists, balance, iters);
  }
};

[[maybe_unused]] double l2(const double* x, const double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (x[i] - y[i]) * (x[i] - y[i]);
  return s;
}
[[maybe_unused]] double l1(const double* x, const double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(x[i] - y[i]);
  return s;
}
[[maybe_unused]] double ip(const double* x, const double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

// An unsigned number from the environment, or `dflt` when it is not set.
[[maybe_unused]] uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}


}  // namespace
