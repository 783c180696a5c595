// Metrics of ABI v2 (ivf_flat.metric.v2, include/udf/abi/metric_v2.h) on the
// GPU: the state and the vector shape, every element type, against float64
// references on the same (converted) data, and L2 written both ways next to
// the v1 L2.  The UDFs are test/gpu/metrics_v2/*.cu, compiled by udfc and
// linked by udf-link at build time into test/modules/v2_l2.udfm (v1 and v2
// L2s), v2_state.udfm and v2_vector.udfm (test/unit/runtime_gpu.cmake).
// GPU tests skip with the reason when there is no driver or device; all
// searches probe every list, so the result must be the exact top k.
#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "udf/runtime.h"
#include "udf/runtime.hpp"

#include "runtime_test_support.h"

namespace {

// ------------------------------------------------------------ references

double pearson_r(const double* x, const double* y, int64_t n) {
  double mx = 0, my = 0;
  for (int64_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= double(n);
  my /= double(n);
  double c = 0, vx = 0, vy = 0;
  for (int64_t i = 0; i < n; ++i) {
    c += (x[i] - mx) * (y[i] - my);
    vx += (x[i] - mx) * (x[i] - mx);
    vy += (y[i] - my) * (y[i] - my);
  }
  return c / std::sqrt(vx * vy);
}
double pearson_dist(const double* x, const double* y, int64_t n) { return 1.0 - pearson_r(x, y, n); }
double cosine_dist(const double* x, const double* y, int64_t n) { return 1.0 - ip(x, y, n) / std::sqrt(ip(x, x, n) * ip(y, y, n)); }
double emd(const double* x, const double* y, int64_t n) {
  double sx = 0, sy = 0;
  for (int64_t i = 0; i < n; ++i) sx += x[i], sy += y[i];
  double cx = 0, cy = 0, e = 0;
  for (int64_t i = 0; i < n; ++i) {
    cx += x[i] / sx;
    cy += y[i] / sy;
    e += std::fabs(cx - cy);
  }
  return e;
}
double js(const double* x, const double* y, int64_t n) {
  double sx = 0, sy = 0;
  for (int64_t i = 0; i < n; ++i) sx += x[i], sy += y[i];
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double p = x[i] / sx, q = y[i] / sy, m = 0.5 * (p + q);
    if (p > 0) s += p * std::log(p / m);  // 0 log 0 = 0
    if (q > 0) s += q * std::log(q / m);
  }
  return 0.5 * s;
}

// ------------------------------------------------------------ data

// Nonnegative data for EMD and Jensen-Shannon: f32 / f16 as max(0, N(0, 1))
// (half the coordinates exactly zero: 0 log 0 is exercised), u8 as is.
Data make_nonneg(std::mt19937_64& rng, udf_dtype t, int64_t rows, int64_t dim) {
  Data d = make_data(rng, t, rows, dim);
  for (size_t i = 0; i < d.v.size(); ++i) {
    if (d.v[i] >= 0) continue;
    d.v[i] = 0;
    if (t == UDF_DTYPE_F32) std::memset(&d.bytes[i * 4], 0, 4);
    if (t == UDF_DTYPE_F16) std::memset(&d.bytes[i * 2], 0, 2);
  }
  return d;
}

// The first n rows of d.
Data head(const Data& d, int64_t n) {
  Data h = d;
  h.rows = n;
  h.bytes.resize(size_t(n * d.dim) * udf_dtype_size(d.dtype));
  h.v.resize(size_t(n * d.dim));
  return h;
}

// dist(query row, base row) for every pair, row-major [query][base].
using PairFn = std::function<double(int64_t qi, int64_t bi)>;
std::vector<double> ref_matrix(int64_t nq, int64_t nb, const PairFn& f) {
  std::vector<double> m(size_t(nq * nb));
  for (int64_t q = 0; q < nq; ++q)
    for (int64_t b = 0; b < nb; ++b) m[size_t(q * nb + b)] = f(q, b);
  return m;
}
PairFn pair_fn(const Data& base, const Data& q, const RefFn& ref) {
  return [&base, &q, ref](int64_t qi, int64_t bi) { return ref(&base.v[bi * base.dim], &q.v[qi * q.dim], base.dim); };
}

// Every query's k results against the reference matrix over the base rows
// that `keep` keeps (all without it): the i-th distance is the i-th reference
// distance (relative tolerance), each id is a kept row's id (ids[row], or the
// row without ids) whose own reference distance matches, ids are distinct;
// past the kept count, id -1 and the worst distance.
void expect_topk(const std::vector<double>& ref, int64_t nb, int64_t nq, const Result& r, uint32_t k, bool max_order,
                 double rel_tol, const std::vector<int64_t>& ids = {},
                 const std::function<bool(int64_t qi, int64_t id)>& keep = nullptr) {
  const float worst = max_order ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  std::map<int64_t, int64_t> row_of;
  for (int64_t b = 0; b < nb; ++b) row_of[ids.empty() ? b : ids[b]] = b;
  int bad = 0;
  for (int64_t qi = 0; qi < nq && bad < 5; ++qi) {
    std::vector<std::pair<double, int64_t>> kept;  // (distance, id)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t id = ids.empty() ? b : ids[b];
      if (!keep || keep(qi, id)) kept.emplace_back(ref[size_t(qi * nb + b)], id);
    }
    std::sort(kept.begin(), kept.end(), [&](const auto& a, const auto& b) { return max_order ? a.first > b.first : a.first < b.first; });
    std::vector<int64_t> seen;
    for (uint32_t i = 0; i < k; ++i) {
      const float d = r.dist[size_t(qi) * k + i];
      const int64_t id = r.ids[size_t(qi) * k + i];
      if (i >= kept.size()) {
        if (id != -1 || d != worst) {
          ADD_FAILURE() << "query " << qi << " rank " << i << " (" << kept.size() << " candidates): got (" << d << ", id " << id
                        << "), want padding (" << worst << ", -1)";
          ++bad;
          break;
        }
        continue;
      }
      const double want = kept[i].first;
      const double tol = rel_tol * (1.0 + std::fabs(want));
      auto row = row_of.find(id);
      const bool known = row != row_of.end() && (!keep || keep(qi, id));
      const double own = known ? ref[size_t(qi * nb + row->second)] : std::nan("");
      if (!(std::fabs(d - want) <= tol) || !known || !(std::fabs(own - d) <= tol) ||
          std::find(seen.begin(), seen.end(), id) != seen.end()) {
        ADD_FAILURE() << "query " << qi << " rank " << i << ": got (" << d << ", id " << id << "), want distance " << want
                      << (known ? " (that id's distance: " + std::to_string(own) + ")" : " (not a candidate id)");
        ++bad;
        break;
      }
      seen.push_back(id);
    }
  }
  EXPECT_EQ(bad, 0);
}

// Two searches of the same lists with metrics that compute the same
// distances (v1 L2, v2 state L2, v2 vector L2): rank by rank the distances
// agree (relative tolerance; 0: bitwise), and where the ids differ the
// distance is tied (within the tolerance) with the other's id at some rank,
// or with the k-th distance (a tie at the cut).
void expect_same(const Result& a, const Result& b, int64_t nq, uint32_t k, double rel_tol, const char* what) {
  SCOPED_TRACE(what);
  int bad = 0;
  int64_t differing = 0;
  for (int64_t q = 0; q < nq && bad < 5; ++q) {
    const float* da = &a.dist[size_t(q) * k];
    const float* db = &b.dist[size_t(q) * k];
    const int64_t* ia = &a.ids[size_t(q) * k];
    const int64_t* ib = &b.ids[size_t(q) * k];
    auto close = [&](double x, double y) { return x == y || std::fabs(x - y) <= rel_tol * (1.0 + std::fabs(x)); };
    for (uint32_t i = 0; i < k; ++i) {
      if (!close(da[i], db[i])) {
        ADD_FAILURE() << "query " << q << " rank " << i << ": distance " << da[i] << " vs " << db[i];
        ++bad;
        break;
      }
      if (ia[i] == ib[i]) continue;
      ++differing;
      bool tied = close(db[i], da[k - 1]);
      for (uint32_t j = 0; j < k && !tied; ++j) tied = ia[j] == ib[i] && close(da[j], db[i]);
      if (!tied) {
        ADD_FAILURE() << "query " << q << " rank " << i << ": id " << ia[i] << " vs " << ib[i] << " at distance " << db[i]
                      << ", not a tie";
        ++bad;
        break;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  if (differing) std::printf("[ note ] %s: %lld of %lld ranks hold other ids at tied distances\n", what,
                             static_cast<long long>(differing), static_cast<long long>(nq * k));
}

// ------------------------------------------------------------ searches

struct SearchOpts {
  std::vector<udf_capture_binding> caps{};
  const char* filter = nullptr;
  std::vector<udf_capture_binding> fcaps{};
  uint32_t max_batch = 0;
  uint32_t qpi = 0;
};

udf_status run_search(udf_index* ix, const Data& q, uint32_t k, uint32_t probes, Result& r, const SearchOpts& o = {}) {
  r.dist.assign(size_t(q.rows) * k, std::numeric_limits<float>::quiet_NaN());  // poison
  r.ids.assign(size_t(q.rows) * k, static_cast<int64_t>(0x5A5A5A5A5A5A5A5A));
  udf_search_params p;
  udf_search_params_default(&p);
  p.k = k;
  p.n_probes = probes;
  p.max_batch = o.max_batch;
  p.queries_per_item = o.qpi;
  p.captures = o.caps.data();
  p.n_captures = o.caps.size();
  p.filter = o.filter;
  p.filter_captures = o.fcaps.data();
  p.n_filter_captures = o.fcaps.size();
  udf_tensor qt = q.tensor();
  udf_tensor od = udf::tensor(r.dist.data(), UDF_DTYPE_F32, q.rows, k);
  udf_tensor oi = udf::tensor(r.ids.data(), UDF_DTYPE_I64, q.rows, k);
  return udf_index_search(ix, &qt, &p, &od, &oi);
}

// The three v2 test modules.
struct V2 : ::testing::Test {
  udf_module* l2m = nullptr;   // v2_l2.udfm: v1 and v2 L2 of every element type
  udf_module* state = nullptr; // v2_state.udfm
  udf_module* vec = nullptr;   // v2_vector.udfm
  void SetUp() override {
    if (!gpu().rt) return;
    for (auto [name, m] : {std::pair{"v2_l2", &l2m}, std::pair{"v2_state", &state}, std::pair{"v2_vector", &vec}})
      ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/" + name + ".udfm").c_str(), m), UDF_OK) << udf_last_error();
  }
  void TearDown() override {
    udf_module_destroy(l2m);
    udf_module_destroy(state);
    udf_module_destroy(vec);
  }
  udf_module* module(const std::string& name) const { return name == "v2_l2" ? l2m : name == "v2_state" ? state : vec; }
  udf_index* build(udf_module* m, const char* metric, const Data& d, uint32_t n_lists, const std::vector<int64_t>& ids = {}) {
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = n_lists;
    p.kmeans_iters = 8;
    p.seed = std::random_device{}();
    udf_tensor t = d.tensor();
    udf_tensor it = udf::tensor(ids.data(), UDF_DTYPE_I64, d.rows, 1);
    udf_index* ix = nullptr;
    EXPECT_EQ(udf_index_build(m, metric, &t, ids.empty() ? nullptr : &it, &p, &ix), UDF_OK) << metric << ": " << udf_last_error();
    return ix;
  }
};

// Modules loaded and destroyed one after another: a later module's kernels
// may get an earlier one's CUfunction handles back, and must still get the
// shared-memory opt-in their launches need (the runtime once kept a
// per-handle record across modules: CUDA_ERROR_INVALID_VALUE at launch in
// about one V2Exact run in twenty under --gtest_repeat).  k 300 and the
// vector shape take more than 48 KB.
TEST_F(V2, ReloadedModulesLaunchWithTheirSharedMemory) {
  REQUIRE_GPU();
  std::mt19937_64 rng(fresh_seed());
  const Data base = make_data(rng, UDF_DTYPE_F16, 600, 100);
  const Data q = make_data(rng, UDF_DTYPE_F16, 8, 100);
  for (int round = 0; round < 24; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    udf_module* m = nullptr;
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/v2_l2.udfm").c_str(), &m), UDF_OK) << udf_last_error();
    for (const char* metric : {"l2_vector_f16", "l2_state_f16"}) {
      udf_index* ix = build(m, metric, base, 8);
      ASSERT_NE(ix, nullptr);
      for (uint32_t k : {10u, 300u}) {
        Result r;
        ASSERT_EQ(run_search(ix, head(q, 1), k, 8, r), UDF_OK) << metric << ", k " << k << ": " << udf_last_error();
        ASSERT_EQ(run_search(ix, q, k, 8, r), UDF_OK) << metric << ", k " << k << ": " << udf_last_error();
      }
      udf_index_destroy(ix);
    }
    udf_module_destroy(m);
  }
}

std::vector<int64_t> sparse_ids(int64_t n) {  // ids 5 * row + 3: not the row numbers
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = 5 * i + 3;
  return ids;
}

}  // namespace

// ------------------------------------------------------------ CPU-only

TEST(RuntimeApiV2, MetricAbiRejectsBadArguments) {
  udf_metric_abi abi = UDF_METRIC_ABI_V1;
  EXPECT_EQ(udf_module_metric_abi(nullptr, 0, &abi), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("NULL"), std::string::npos) << udf_last_error();
}

// ------------------------------------------------------------ GPU

// udf_module_metric_abi and udf_metric_info for each metric of the modules.
TEST_F(V2, ModulesReportEachMetricsAbi) {
  REQUIRE_GPU();
  struct Want {
    udf_metric_abi abi;
    udf_dtype elem, acc;
    udf_order order;
    uint32_t n_captures;
  };
  const udf_dtype F32 = UDF_DTYPE_F32, F16 = UDF_DTYPE_F16, I8 = UDF_DTYPE_I8, U8 = UDF_DTYPE_U8, I32 = UDF_DTYPE_I32;
  const udf_metric_abi V1 = UDF_METRIC_ABI_V1, ST = UDF_METRIC_ABI_V2_STATE, VE = UDF_METRIC_ABI_V2_VECTOR;
  const udf_order MIN = UDF_ORDER_MIN, MAX = UDF_ORDER_MAX;
  const std::map<std::string, std::map<std::string, Want>> want = {
      {"v2_l2",
       {{"udf_builtin_l2", {V1, F32, F32, MIN, 0}},      {"f16_l2", {V1, F16, F32, MIN, 0}},
        {"int8_l2", {V1, I8, I32, MIN, 0}},              {"l2_v1_u8", {V1, U8, I32, MIN, 0}},
        {"l2_state_f32", {ST, F32, F32, MIN, 0}},        {"l2_state_f16", {ST, F16, F32, MIN, 0}},
        {"l2_state_i8", {ST, I8, I32, MIN, 0}},          {"l2_state_u8", {ST, U8, I32, MIN, 0}},
        {"l2_vector_f32", {VE, F32, F32, MIN, 0}},       {"l2_vector_f16", {VE, F16, F32, MIN, 0}},
        {"l2_vector_i8", {VE, I8, I32, MIN, 0}},         {"l2_vector_u8", {VE, U8, I32, MIN, 0}}}},
      {"v2_state",
       {{"pearson_f32", {ST, F32, F32, MIN, 0}},         {"pearson_f16", {ST, F16, F32, MIN, 0}},
        {"pearson_i8", {ST, I8, I32, MIN, 0}},           {"pearson_i8f", {ST, I8, F32, MIN, 0}},
        {"pearson_u8", {ST, U8, I32, MIN, 0}},           {"pearson_u8f", {ST, U8, F32, MIN, 0}},
        {"pearson_sim_f32", {ST, F32, F32, MAX, 0}},     {"cosine_f32", {ST, F32, F32, MIN, 0}},
        {"cosine_f16", {ST, F16, F32, MIN, 0}},          {"cosine_i8", {ST, I8, I32, MIN, 0}},
        {"cosine_u8", {ST, U8, I32, MIN, 0}},            {"cosine_u8f", {ST, U8, F32, MIN, 0}},
        {"weighted_cosine", {ST, F32, F32, MIN, 1}},
        {"l2_ctx", {ST, F32, F32, MIN, 1}}}},
      {"v2_vector",
       {{"emd_f32", {VE, F32, F32, MIN, 0}},             {"emd_f16", {VE, F16, F32, MIN, 0}},
        {"emd_u8", {VE, U8, I32, MIN, 0}},               {"emd_u8f", {VE, U8, F32, MIN, 0}},
        {"js_f32", {VE, F32, F32, MIN, 0}},              {"js_f16", {VE, F16, F32, MIN, 0}},
        {"js_u8f", {VE, U8, F32, MIN, 0}},               {"weighted_l2_vector", {VE, F32, F32, MIN, 1}},
        {"l2_ctx_vector", {VE, F32, F32, MIN, 1}},       {"dot_vector", {VE, F32, F32, MAX, 0}}}},
  };
  for (const auto& [mod, metrics] : want) {
    SCOPED_TRACE(mod);
    udf_module* m = module(mod);
    size_t n = 0;
    ASSERT_EQ(udf_module_metric_count(m, &n), UDF_OK);
    EXPECT_EQ(n, metrics.size());
    for (const auto& [sym, w] : metrics) {
      SCOPED_TRACE(sym);
      size_t i = 0;
      ASSERT_EQ(udf_module_find_metric(m, sym.c_str(), &i), UDF_OK) << udf_last_error();
      udf_metric_abi abi{};
      ASSERT_EQ(udf_module_metric_abi(m, i, &abi), UDF_OK) << udf_last_error();
      EXPECT_EQ(abi, w.abi);
      udf_metric_info mi{};
      ASSERT_EQ(udf_module_metric_info(m, i, &mi), UDF_OK) << udf_last_error();
      EXPECT_STREQ(mi.symbol, sym.c_str());
      EXPECT_EQ(mi.elem, w.elem);
      EXPECT_EQ(mi.acc, w.acc);
      EXPECT_EQ(mi.order, w.order);
      EXPECT_EQ(mi.n_captures, w.n_captures);
      EXPECT_EQ(mi.max_k, 1024u);
      if (w.abi == ST) {
        ASSERT_NE(mi.finalize, nullptr);
        EXPECT_EQ(std::string(mi.finalize), sym + "_finalize");
      } else if (w.abi == VE) {
        EXPECT_EQ(mi.finalize, nullptr);
      }
    }
    udf_metric_abi abi{};
    EXPECT_EQ(udf_module_metric_abi(m, n, &abi), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(udf_last_error()).find("out of range"), std::string::npos) << udf_last_error();
    EXPECT_EQ(udf_module_metric_abi(m, 0, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  }
  // Filters linked with v2 metrics.
  size_t nf = 0;
  ASSERT_EQ(udf_module_filter_count(state, &nf), UDF_OK);
  EXPECT_EQ(nf, 1u);
  ASSERT_EQ(udf_module_filter_count(vec, &nf), UDF_OK);
  EXPECT_EQ(nf, 2u);
}

struct V2Case {
  const char* module;
  const char* metric;
  udf_dtype dtype;
  bool nonneg;  // data: make_nonneg, else make_data
  bool max_order;
  RefFn ref;
  double tol;
  int64_t dim;
};

std::vector<V2Case> v2_cases() {
  const udf_dtype F32 = UDF_DTYPE_F32, F16 = UDF_DTYPE_F16, I8 = UDF_DTYPE_I8, U8 = UDF_DTYPE_U8;
  return {
      // State shape: Pearson correlation distance (five sums), Pearson r (max), cosine without norms.
      {"v2_state", "pearson_f32", F32, false, false, pearson_dist, 1e-4, 37},
      {"v2_state", "pearson_f16", F16, false, false, pearson_dist, 1e-3, 100},
      {"v2_state", "pearson_i8", I8, false, false, pearson_dist, 1e-5, 100},
      {"v2_state", "pearson_i8f", I8, false, false, pearson_dist, 1e-4, 45},
      {"v2_state", "pearson_u8", U8, false, false, pearson_dist, 1e-5, 100},
      {"v2_state", "pearson_u8f", U8, false, false, pearson_dist, 1e-4, 37},
      {"v2_state", "pearson_sim_f32", F32, false, true, pearson_r, 1e-4, 50},
      {"v2_state", "cosine_f32", F32, false, false, cosine_dist, 1e-4, 37},
      {"v2_state", "cosine_f16", F16, false, false, cosine_dist, 1e-3, 100},
      {"v2_state", "cosine_i8", I8, false, false, cosine_dist, 1e-5, 100},
      {"v2_state", "cosine_u8", U8, false, false, cosine_dist, 1e-5, 100},
      {"v2_state", "cosine_u8f", U8, false, false, cosine_dist, 1e-5, 45},
      // Vector shape: 1-D EMD and Jensen-Shannon on nonnegative data, inner product (max).
      {"v2_vector", "emd_f32", F32, true, false, emd, 1e-4, 37},
      {"v2_vector", "emd_f16", F16, true, false, emd, 1e-3, 100},
      {"v2_vector", "emd_u8", U8, true, false, emd, 1e-5, 100},
      {"v2_vector", "emd_u8f", U8, true, false, emd, 1e-4, 45},
      {"v2_vector", "js_f32", F32, true, false, js, 1e-4, 37},
      {"v2_vector", "js_f16", F16, true, false, js, 1e-3, 100},
      {"v2_vector", "js_u8f", U8, true, false, js, 1e-4, 100},
      {"v2_vector", "dot_vector", F32, false, true, ip, 1e-4, 64},
      // L2 in both shapes, every element type.
      {"v2_l2", "l2_state_f32", F32, false, false, l2, 1e-4, 37},
      {"v2_l2", "l2_state_f16", F16, false, false, l2, 1e-3, 100},
      {"v2_l2", "l2_state_i8", I8, false, false, l2, 0, 100},
      {"v2_l2", "l2_state_u8", U8, false, false, l2, 0, 37},
      {"v2_l2", "l2_vector_f32", F32, false, false, l2, 1e-4, 37},
      {"v2_l2", "l2_vector_f16", F16, false, false, l2, 1e-3, 100},
      {"v2_l2", "l2_vector_i8", I8, false, false, l2, 0, 100},
      {"v2_l2", "l2_vector_u8", U8, false, false, l2, 0, 37},
  };
}

class V2Exact : public V2, public ::testing::WithParamInterface<int> {};

// Every list probed: the exact top k under the metric, for k 10, 100 (the
// k128 variants) and 300 (k1024), one query and a batch of 64.
TEST_P(V2Exact, AllListsProbedMatchesFloat64) {
  REQUIRE_GPU();
  const V2Case c = v2_cases()[GetParam()];
  SCOPED_TRACE(c.metric);
  std::mt19937_64 rng(fresh_seed());
  const int64_t rows = 2000;
  const Data base = c.nonneg ? make_nonneg(rng, c.dtype, rows, c.dim) : make_data(rng, c.dtype, rows, c.dim);
  const Data q = c.nonneg ? make_nonneg(rng, c.dtype, 64, c.dim) : make_data(rng, c.dtype, 64, c.dim);
  const std::vector<double> ref = ref_matrix(q.rows, rows, pair_fn(base, q, c.ref));
  const uint32_t n_lists = 16;
  udf_index* ix = build(module(c.module), c.metric, base, n_lists);
  ASSERT_NE(ix, nullptr);
  for (uint32_t k : {10u, 100u, 300u}) {
    SCOPED_TRACE("k " + std::to_string(k));
    for (int64_t nq : {int64_t(1), q.rows}) {
      Result r;
      ASSERT_EQ(run_search(ix, head(q, nq), k, n_lists, r), UDF_OK) << udf_last_error();
      expect_topk(ref, rows, nq, r, k, c.max_order, c.tol);
    }
  }
  udf_index_destroy(ix);
}
INSTANTIATE_TEST_SUITE_P(Metrics, V2Exact, ::testing::Range(0, static_cast<int>(v2_cases().size())),
                         [](const auto& i) { return std::string(v2_cases()[i.param].metric); });

// Vector shape with large dims: the runtime stages fewer rows per warp (and
// fewer queries per item) to fit shared memory.  k 10 and 1000.
TEST_F(V2, VectorShapeLargeDims) {
  REQUIRE_GPU();
  struct Case {
    const char* metric;
    udf_dtype dtype;
    bool nonneg;
    RefFn ref;
    double tol;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {"emd_f32", UDF_DTYPE_F32, true, emd, 1e-3, 1500},
      {"js_f32", UDF_DTYPE_F32, true, js, 1e-4, 1200},
      {"emd_u8", UDF_DTYPE_U8, true, emd, 1e-5, 2000},
      {"js_f16", UDF_DTYPE_F16, true, js, 1e-3, 1031},
      {"l2_vector_f16", UDF_DTYPE_F16, false, l2, 1e-3, 1000},
      {"l2_vector_i8", UDF_DTYPE_I8, false, l2, 1e-6, 4096},  // sums above 2^24 round in the float result
  };
  std::mt19937_64 rng(fresh_seed());
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.metric) + " dim " + std::to_string(c.dim));
    const int64_t rows = 1200;
    const Data base = c.nonneg ? make_nonneg(rng, c.dtype, rows, c.dim) : make_data(rng, c.dtype, rows, c.dim);
    const Data q = c.nonneg ? make_nonneg(rng, c.dtype, 24, c.dim) : make_data(rng, c.dtype, 24, c.dim);
    const std::vector<double> ref = ref_matrix(q.rows, rows, pair_fn(base, q, c.ref));
    const std::string mod = std::string(c.metric).rfind("l2_", 0) == 0 ? "v2_l2" : "v2_vector";
    udf_index* ix = build(module(mod), c.metric, base, 8);
    ASSERT_NE(ix, nullptr);
    for (uint32_t k : {10u, 1000u}) {
      Result r;
      ASSERT_EQ(run_search(ix, q, k, 8, r), UDF_OK) << udf_last_error();
      expect_topk(ref, rows, q.rows, r, k, false, c.tol);
    }
    udf_index_destroy(ix);
  }
}

// L2 as a v2 state UDF and as a v2 vector UDF scanning the very lists of the
// v1 L2's index (udf_index_with_metric): the same distances and ids as v1,
// every element type, all lists and a few, k 10 / 100 / 300.
TEST_F(V2, L2StateAndVectorMatchV1L2) {
  REQUIRE_GPU();
  struct Case {
    const char *v1, *state, *vector;
    udf_dtype dtype;
    int64_t dim;
    double tol;  // between the three (0: equal), and against float64
  };
  const std::vector<Case> cases = {
      {"udf_builtin_l2", "l2_state_f32", "l2_vector_f32", UDF_DTYPE_F32, 37, 1e-5},
      {"f16_l2", "l2_state_f16", "l2_vector_f16", UDF_DTYPE_F16, 100, 1e-5},
      {"int8_l2", "l2_state_i8", "l2_vector_i8", UDF_DTYPE_I8, 100, 0},
      {"l2_v1_u8", "l2_state_u8", "l2_vector_u8", UDF_DTYPE_U8, 45, 0},
  };
  std::mt19937_64 rng(fresh_seed());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.v1);
    const int64_t rows = 3000;
    const Data base = make_data(rng, c.dtype, rows, c.dim), q = make_data(rng, c.dtype, 100, c.dim);
    const uint32_t n_lists = 20;
    udf_index* v1 = build(l2m, c.v1, base, n_lists);
    ASSERT_NE(v1, nullptr);
    udf_index *st = nullptr, *ve = nullptr;
    ASSERT_EQ(udf_index_with_metric(v1, l2m, c.state, &st), UDF_OK) << udf_last_error();
    ASSERT_EQ(udf_index_with_metric(v1, l2m, c.vector, &ve), UDF_OK) << udf_last_error();
    for (uint32_t k : {10u, 100u, 300u}) {
      for (uint32_t probes : {n_lists, 3u}) {
        SCOPED_TRACE("k " + std::to_string(k) + ", n_probes " + std::to_string(probes));
        Result a, b, v;
        ASSERT_EQ(search(v1, q, k, probes, a), UDF_OK) << udf_last_error();
        ASSERT_EQ(run_search(st, q, k, probes, b), UDF_OK) << udf_last_error();
        ASSERT_EQ(run_search(ve, q, k, probes, v), UDF_OK) << udf_last_error();
        expect_same(a, b, q.rows, k, c.tol, "v1 vs v2 state");
        expect_same(a, v, q.rows, k, c.tol, "v1 vs v2 vector");
        if (probes == n_lists) {
          const double tol = c.dtype == UDF_DTYPE_F32 ? 1e-4 : c.dtype == UDF_DTYPE_F16 ? 1e-3 : 0;
          expect_exact(base, q, b, k, false, l2, tol);
          expect_exact(base, q, v, k, false, l2, tol);
        }
      }
    }
    udf_index_destroy(ve);
    udf_index_destroy(st);
    udf_index_destroy(v1);
  }
}

// Captures: an f32 array in a state UDF (weighted cosine: ctx->dim indexes
// it) and in a vector UDF (weighted L2: the UDF's own loop), host and device.
TEST_F(V2, ArrayCapturesInBothShapes) {
  REQUIRE_GPU();
  std::mt19937_64 rng(fresh_seed());
  const int64_t dim = 41, rows = 2500;
  const Data base = make_data(rng, UDF_DTYPE_F32, rows, dim), q = make_data(rng, UDF_DTYPE_F32, 50, dim);
  Weights weights(rng, dim, 0.1, 4);
  std::vector<float>& w = weights.w;
  const std::vector<double>& wd = weights.wd;
  auto wcos = [&](const double* x, const double* y, int64_t n) {
    double d = 0, xx = 0, yy = 0;
    for (int64_t i = 0; i < n; ++i) d += wd[i] * x[i] * y[i], xx += wd[i] * x[i] * x[i], yy += wd[i] * y[i] * y[i];
    return 1.0 - d / std::sqrt(xx * yy);
  };
  const RefFn wl2 = weights.l2_ref();
  udf_tensor host_w = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  DevMem dw(w.data(), w.size() * 4);
  udf_tensor dev_w = udf::tensor(dw.ptr(), UDF_DTYPE_F32, dim, 1, 0);
  for (auto [m, metric, ref] : {std::tuple{state, "weighted_cosine", RefFn(wcos)}, std::tuple{vec, "weighted_l2_vector", RefFn(wl2)}}) {
    SCOPED_TRACE(metric);
    const std::vector<double> rm = ref_matrix(q.rows, rows, pair_fn(base, q, ref));
    udf_index* ix = build(m, metric, base, 16);
    ASSERT_NE(ix, nullptr);
    for (const udf_tensor* t : {&host_w, &dev_w}) {
      for (uint32_t k : {10u, 300u}) {
        Result r;
        ASSERT_EQ(run_search(ix, q, k, 16, r, {.caps = {{"w", t, 0, 0}}}), UDF_OK) << udf_last_error();
        expect_topk(rm, rows, q.rows, r, k, false, 1e-4);
      }
    }
    Result r;
    EXPECT_EQ(run_search(ix, q, 10, 16, r), UDF_ERROR_CAPTURE);
    EXPECT_NE(std::string(udf_last_error()).find("w:f32[]"), std::string::npos) << udf_last_error();
    udf_tensor short_w = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim - 1);
    EXPECT_EQ(run_search(ix, q, 10, 16, r, {.caps = {{"w", &short_w, 0, 0}}}), UDF_ERROR_CAPTURE);
    udf_index_destroy(ix);
  }
}

// The context: ctx->id is the stored vector's id (sparse ids, not rows),
// ctx->query the query's row in the caller's batch across internal chunks
// (max_batch), with a scalar capture; state (finalize) and vector shapes.
TEST_F(V2, ContextIdAndQueryRowInBothShapes) {
  REQUIRE_GPU();
  std::mt19937_64 rng(fresh_seed());
  const int64_t dim = 30, rows = 2000;
  const Data base = make_data(rng, UDF_DTYPE_F32, rows, dim), q = make_data(rng, UDF_DTYPE_F32, 70, dim);
  const std::vector<int64_t> ids = sparse_ids(rows);
  const float bias = 0.75f;
  const std::vector<double> rm = ref_matrix(q.rows, rows, [&](int64_t qi, int64_t bi) {
    return (l2(&base.v[bi * dim], &q.v[qi * dim], dim) + double(bias) * double(ids[bi] % 7)) * double(1 + qi % 3);
  });
  for (auto [m, metric] : {std::pair{state, "l2_ctx"}, std::pair{vec, "l2_ctx_vector"}}) {
    SCOPED_TRACE(metric);
    udf_index* ix = build(m, metric, base, 12, ids);
    ASSERT_NE(ix, nullptr);
    for (auto [max_batch, qpi] : {std::pair{0u, 0u}, std::pair{16u, 4u}, std::pair{29u, 1u}}) {
      for (uint32_t k : {10u, 100u}) {
        SCOPED_TRACE("max_batch " + std::to_string(max_batch) + ", k " + std::to_string(k));
        Result r;
        ASSERT_EQ(run_search(ix, q, k, 12, r, {.caps = {{"bias", nullptr, bias, 0}}, .max_batch = max_batch, .qpi = qpi}),
                  UDF_OK)
            << udf_last_error();
        expect_topk(rm, rows, q.rows, r, k, false, 1e-4, ids);
      }
    }
    udf_index_destroy(ix);
  }
}

// v2 metrics with filters (udf-link --pair): the built-in bitmap with a state
// UDF (pearson_f32) and a vector UDF with an i32 accumulator (emd_u8), and a
// per-query filter (query_group) with a vector UDF (js_f32) across chunks.
TEST_F(V2, FilteredV2MetricsMatchFloat64OverKeptIds) {
  REQUIRE_GPU();
  std::mt19937_64 rng(fresh_seed());
  const int64_t rows = 6000;
  const int64_t n_ids = 5 * rows + 3;
  struct Case {
    udf_module* m;
    const char* metric;
    udf_dtype dtype;
    bool nonneg;
    RefFn ref;
    double tol;
    int64_t dim;
  };
  for (const Case& c : {Case{state, "pearson_f32", UDF_DTYPE_F32, false, pearson_dist, 1e-4, 37},
                        Case{vec, "emd_u8", UDF_DTYPE_U8, true, emd, 1e-5, 50}}) {
    SCOPED_TRACE(c.metric);
    const Data base = c.nonneg ? make_nonneg(rng, c.dtype, rows, c.dim) : make_data(rng, c.dtype, rows, c.dim);
    const Data q = c.nonneg ? make_nonneg(rng, c.dtype, 40, c.dim) : make_data(rng, c.dtype, 40, c.dim);
    const std::vector<double> rm = ref_matrix(q.rows, rows, pair_fn(base, q, c.ref));
    const std::vector<int64_t> ids = sparse_ids(rows);
    udf_index* ix = build(c.m, c.metric, base, 16, ids);
    ASSERT_NE(ix, nullptr);
    for (double selectivity : {1.0, 0.3, 0.005, 0.0}) {
      SCOPED_TRACE("selectivity " + std::to_string(selectivity));
      std::vector<uint8_t> bitmap((n_ids + 7) / 8, 0);
      std::bernoulli_distribution take(selectivity);
      for (int64_t i = 0; i < rows; ++i)
        if (selectivity >= 1.0 || take(rng)) bitmap[ids[i] / 8] |= uint8_t(1u << (ids[i] % 8));
      auto keep = [&](int64_t, int64_t id) { return id >= 0 && id < n_ids && ((bitmap[id / 8] >> (id % 8)) & 1); };
      udf_tensor bt = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bitmap.size()));
      for (uint32_t k : {10u, 300u}) {
        Result r;
        ASSERT_EQ(run_search(ix, q, k, 16, r,
                             {.filter = "udf_builtin_bitmap",
                              .fcaps = {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, static_cast<int32_t>(n_ids)}}}),
                  UDF_OK)
            << udf_last_error();
        expect_topk(rm, rows, q.rows, r, k, false, c.tol, ids, keep);
      }
    }
    // A filter the module lacks; one it has but not linked with this metric (udf-link --pair).
    Result r;
    EXPECT_EQ(run_search(ix, q, 10, 16, r, {.filter = "no_such_filter"}), UDF_ERROR_INVALID_ARGUMENT);
    if (c.m == vec) {
      EXPECT_EQ(run_search(ix, q, 10, 16, r, {.filter = "query_group", .fcaps = {{"n_groups", nullptr, 0, 3}}}), UDF_ERROR_MISMATCH);
      EXPECT_NE(std::string(udf_last_error()).find("--pair emd_u8:query_group"), std::string::npos) << udf_last_error();
    }
    udf_index_destroy(ix);
  }
  // query_group: query row q keeps the ids with id % g == q % g.
  const int64_t dim = 64;
  const Data base = make_nonneg(rng, UDF_DTYPE_F32, rows, dim), q = make_nonneg(rng, UDF_DTYPE_F32, 90, dim);
  const std::vector<double> rm = ref_matrix(q.rows, rows, pair_fn(base, q, js));
  const std::vector<int64_t> ids = sparse_ids(rows);
  udf_index* ix = build(vec, "js_f32", base, 16, ids);
  ASSERT_NE(ix, nullptr);
  for (int32_t g : {3, 11}) {
    auto keep = [&](int64_t qrow, int64_t id) { return id % g == qrow % g; };
    for (auto [max_batch, qpi] : {std::pair{0u, 0u}, std::pair{32u, 8u}, std::pair{37u, 1u}}) {
      SCOPED_TRACE("groups " + std::to_string(g) + ", max_batch " + std::to_string(max_batch));
      Result r;
      ASSERT_EQ(run_search(ix, q, 50, 16, r,
                           {.filter = "query_group", .fcaps = {{"n_groups", nullptr, 0, g}}, .max_batch = max_batch, .qpi = qpi}),
                UDF_OK)
          << udf_last_error();
      expect_topk(rm, rows, q.rows, r, 50, false, 1e-4, ids, keep);
    }
  }
  udf_index_destroy(ix);
}
