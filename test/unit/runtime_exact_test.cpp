// udf_exact_search and udf_refine (include/udf/runtime.h, docs/exact-search.md)
// on one GPU (skipped with the reason without one), against float64 brute
// force: ABI v1 metrics of every element type, ABI v2 state and vector
// metrics, with and without filters, batches of 1, 100 and 10000, k 1, 10,
// 100 and 1024; host and device datasets, rows read in place and rows
// copied (a dimension that is no multiple of 16 bytes, a strided dataset).
// The tiled fold against the fold of a row a lane.  Refine: padding,
// repeats, and an id out of range named.  The modules are
// linked on demand from the test artifacts (udf_module_link_ex), which links
// the rows scans when first used; a module loaded from a file without them
// is refused, naming the fix.
#include <gtest/gtest.h>

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "udf/runtime.h"
#include "udf/runtime.hpp"
#include "runtime_test_support.h"

namespace {

// A module linked on demand from artifacts (relative to artifact_dir()),
// destroyed with the object.
struct OnDemand {
  udf_module* m = nullptr;
  explicit OnDemand(const std::vector<std::string>& artifacts) {
    static const std::string cache = ::testing::TempDir() + "udf-exact-test-" + std::to_string(::getpid());
    const std::string pack = kernel_pack_dir();
    udf_link_options o = link_options(cache, pack);
    o.prefetch_k = 0;
    std::vector<std::string> paths;
    std::vector<udf_artifact_source> src;
    for (const auto& a : artifacts) paths.push_back(a[0] == '/' || a[0] == '.' ? a : artifact_dir() + "/" + a);
    for (const auto& p : paths) src.push_back(udf_artifact_source{p.c_str(), nullptr, 0, nullptr});
    EXPECT_EQ(udf_module_link_ex(gpu().rt, src.data(), src.size(), &o, &m), UDF_OK) << udf_last_error();
  }
  ~OnDemand() { udf_module_destroy(m); }
  OnDemand(const OnDemand&) = delete;
  OnDemand& operator=(const OnDemand&) = delete;
  std::string metric(size_t i = 0) const {
    udf_metric_info info{};
    EXPECT_EQ(udf_module_metric_info(m, i, &info), UDF_OK) << udf_last_error();
    return info.symbol;
  }
};

// A built-in artifact (kind "metrics" or "filters"): share/udf/<kind>/ of
// the build tree, else builtin/ among the test artifacts (.device/).
std::string builtin_artifact(const std::string& kind, const std::string& name) {
  const std::string built = artifact_dir() + "/../../share/udf/" + kind + "/" + name;
  return std::ifstream(built).good() ? built : artifact_dir() + "/builtin/" + name;
}

// Where the dataset is read from: host memory, device memory in place, or
// device memory with rows further apart than dim (copied by the runtime).
enum class Where { Host, Device, DeviceStrided };

// Runs an exact search (candidates null) or a refine of `q` over `base`.
udf_status rows_call(udf_module* m, const std::string& metric, const Data& base, Where where, const Data& q,
                     const udf_search_params& p, Result& r, const std::vector<int64_t>* candidates = nullptr,
                     int64_t n_cand = 0) {
  const uint32_t k = p.k;
  r.dist.assign(q.rows * k, std::numeric_limits<float>::quiet_NaN());
  r.ids.assign(q.rows * k, static_cast<int64_t>(0x5A5A5A5A5A5A5A5A));
  udf_tensor dt = base.tensor();
  std::optional<DevMem> dev;
  if (where == Where::Device) {
    dev.emplace(base.bytes.data(), base.bytes.size());
    dt.data = dev->ptr();
    dt.device = 0;
  } else if (where == Where::DeviceStrided) {  // each row followed by 3 spare elements
    const size_t es = udf_dtype_size(base.dtype), row = size_t(base.dim) * es, pitch = row + 3 * es;
    std::vector<uint8_t> spaced(size_t(base.rows) * pitch, 0xEE);
    for (int64_t i = 0; i < base.rows; ++i) std::memcpy(&spaced[i * pitch], &base.bytes[i * row], row);
    dev.emplace(spaced.data(), spaced.size());
    dt.data = dev->ptr();
    dt.device = 0;
    dt.row_stride = base.dim + 3;
  }
  udf_tensor qt = q.tensor();
  udf_tensor od = udf::tensor(r.dist.data(), UDF_DTYPE_F32, q.rows, k);
  udf_tensor oi = udf::tensor(r.ids.data(), UDF_DTYPE_I64, q.rows, k);
  if (!candidates) return udf_exact_search(m, metric.c_str(), &dt, &qt, &p, &od, &oi);
  udf_tensor ct = udf::tensor(candidates->data(), UDF_DTYPE_I64, q.rows, n_cand);
  return udf_refine(m, metric.c_str(), &dt, &qt, &ct, &p, &od, &oi);
}

// Every query's results against float64 brute force over the rows `kept`
// allows for it (every row when null): the i-th distance is the i-th best,
// each id's own distance is the reported one, ids are distinct, and -1
// (with the worst distance) pads past the rows allowed.
void expect_best(const Data& base, const Data& q, const Result& r, uint32_t k, const RefFn& ref, double rel_tol,
                 const std::function<bool(int64_t, int64_t)>& kept = nullptr) {
  int bad = 0;
  for (int64_t qi = 0; qi < q.rows && bad < 5; ++qi) {
    std::vector<double> all(base.rows, std::numeric_limits<double>::infinity());
    std::vector<double> sorted;
    for (int64_t i = 0; i < base.rows; ++i) {
      if (kept && !kept(qi, i)) continue;
      all[i] = ref(&base.v[i * base.dim], &q.v[qi * q.dim], base.dim);
      sorted.push_back(all[i]);
    }
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> seen;
    for (uint32_t i = 0; i < k; ++i) {
      const float d = r.dist[qi * k + i];
      const int64_t id = r.ids[qi * k + i];
      if (i >= sorted.size()) {
        if (id != -1 || !(d == std::numeric_limits<float>::infinity())) {
          ADD_FAILURE() << "query " << qi << " rank " << i << ": got (" << d << ", id " << id << "), want padding";
          ++bad;
          break;
        }
        continue;
      }
      const double want = sorted[i], tol = rel_tol * (1.0 + std::fabs(want));
      if (!(std::fabs(d - want) <= tol) || id < 0 || id >= base.rows || !(std::fabs(all[id] - d) <= tol) ||
          std::find(seen.begin(), seen.end(), id) != seen.end()) {
        ADD_FAILURE() << "query " << qi << " rank " << i << ": got (" << d << ", id " << id << "), want distance "
                      << want;
        ++bad;
        break;
      }
      seen.push_back(id);
    }
  }
  EXPECT_EQ(bad, 0);
}

udf_search_params params(uint32_t k) {
  udf_search_params p;
  udf_search_params_default(&p);
  p.k = k;
  return p;
}

struct ExactTest : ::testing::Test {
  std::mt19937_64 rng{fresh_seed()};
};

// One metric of each ABI shape and element type over a dataset of n rows:
// batches 1 and 100 at k 1, 10, 100 and 1024, from host and device memory.
struct Case {
  const char* artifact;
  udf_dtype dtype;
  RefFn ref;
  double tol;
};

TEST_F(ExactTest, EveryAbiAndElementTypeMatchesBruteForce) {
  REQUIRE_GPU();
  const std::vector<Case> cases = {
      {"l2_sqrt.udfa", UDF_DTYPE_F32, [](const double* x, const double* y, int64_t n) { return std::sqrt(l2(x, y, n)); }, 1e-4},
      {"v2/l2_v1_u8.udfa", UDF_DTYPE_U8, l2, 1e-6},      {"f16_l2.udfa", UDF_DTYPE_F16, l2, 1e-4},
      {"int8_l2.udfa", UDF_DTYPE_I8, l2, 1e-6},          {"u8_l1.udfa", UDF_DTYPE_U8, l1, 1e-6},
      {"v2/l2_state_f32.udfa", UDF_DTYPE_F32, l2, 1e-4}, {"v2/l2_state_i8.udfa", UDF_DTYPE_I8, l2, 1e-6},
      {"v2/l2_vector_f32.udfa", UDF_DTYPE_F32, l2, 1e-4}, {"v2/l2_vector_f16.udfa", UDF_DTYPE_F16, l2, 1e-4},
      {"v2/l2_vector_u8.udfa", UDF_DTYPE_U8, l2, 1e-6},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.artifact);
    OnDemand od({c.artifact});
    ASSERT_NE(od.m, nullptr);
    const std::string metric = od.metric();
    // dim 100: f32 rows are read in place; f16, i8 and u8 rows (not a
    // multiple of 16 bytes) are copied with padding.
    const Data base = make_data(rng, c.dtype, 2500, 100);
    int round = 0;
    for (int64_t batch : {1, 100}) {
      const Data q = make_data(rng, c.dtype, batch, 100);
      for (uint32_t k : {1u, 10u, 100u, 1024u}) {
        SCOPED_TRACE("batch " + std::to_string(batch) + ", k " + std::to_string(k));
        const Where where = (round++ % 2) ? Where::Device : Where::Host;
        Result r;
        ASSERT_EQ(rows_call(od.m, metric, base, where, q, params(k), r), UDF_OK) << udf_last_error();
        expect_best(base, q, r, k, c.ref, c.tol);
      }
    }
  }
}

// The weighted-L2 UDF (a capture) at batch 10000, from a strided device
// dataset (copied) and a contiguous one (read in place): the same results.
TEST_F(ExactTest, LargeBatchWithCapturesInPlaceAndCopied) {
  REQUIRE_GPU();
  OnDemand od({"weighted_l2.udfa"});
  ASSERT_NE(od.m, nullptr);
  const Data base = make_data(rng, UDF_DTYPE_F32, 3000, 64);
  const Data q = make_data(rng, UDF_DTYPE_F32, 10000, 64);
  const Weights w(rng, 64, 0.5, 2.0);
  udf_tensor wt = udf::tensor(w.w.data(), UDF_DTYPE_F32, 64, 1);
  const udf_capture_binding cap{"weights", &wt, 0, 0};
  udf_search_params p = params(10);
  p.captures = &cap;
  p.n_captures = 1;
  Result in_place, copied;
  ASSERT_EQ(rows_call(od.m, od.metric(), base, Where::Device, q, p, in_place), UDF_OK) << udf_last_error();
  expect_best(base, q, in_place, 10, w.l2_ref(), 1e-4);
  ASSERT_EQ(rows_call(od.m, od.metric(), base, Where::DeviceStrided, q, p, copied), UDF_OK) << udf_last_error();
  EXPECT_EQ(in_place.ids, copied.ids);
  EXPECT_EQ(0, std::memcmp(in_place.dist.data(), copied.dist.data(), in_place.dist.size() * 4));
}

// TILED FOLD (ivf_flat_v1.h, ROWS LAYOUT): on sm_80 and newer an unfiltered
// item of 16 queries of a v1 f32 metric folds as a tile.  Its results are
// the fold's of a row a lane (udf_testing_paths kPathNoTile), bit for bit,
// and the float64 brute force's: a capture (weighted L2), a finalize (L2,
// then sqrt), the max order (inner product); dims whose chunks fill the
// stage's halves (128), leave the last half short (100: 25 chunks) and end
// in a partial chunk (130, 5); k 10 (the offer filter over the tile's
// registers), 100 and 1024 (the keys through shared memory); 3000 rows (a
// last group of 24; the last tile's last pair of steps has groups past its
// end, TILED PAIR) and 2100 (the last tile one step of two groups, folded
// alone); batches of whole items of 16 and with a shorter last one.
TEST_F(ExactTest, TiledFoldGivesTheBitsOfTheFoldOfARowALane) {
  REQUIRE_GPU();
  struct TileCase {
    const char* artifact;
    bool weighted, max_order;
  };
  for (const TileCase c : {TileCase{"weighted_l2.udfa", true, false}, TileCase{"l2_sqrt.udfa", false, false},
                           TileCase{"inner_product.udfa", false, true}}) {
    SCOPED_TRACE(c.artifact);
    OnDemand od({c.artifact});
    ASSERT_NE(od.m, nullptr);
    const std::string metric = od.metric();
    for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{3000, 5}, {3000, 100}, {3000, 128}, {3000, 130}, {2100, 128}}) {
      const Data base = make_data(rng, UDF_DTYPE_F32, rows, dim);
      const Weights w(rng, dim, 0.5, 2.0);
      udf_tensor wt = udf::tensor(w.w.data(), UDF_DTYPE_F32, dim, 1);
      const udf_capture_binding cap{"weights", &wt, 0, 0};
      const RefFn ref = c.weighted ? w.l2_ref() : RefFn([](const double* x, const double* y, int64_t n) { return std::sqrt(l2(x, y, n)); });
      for (const auto& [batch, k] : {std::pair<int64_t, uint32_t>{40, 10}, {10000, 10}, {40, 100}, {320, 1024}}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + ", dim " + std::to_string(dim) + ", batch " + std::to_string(batch) + ", k " +
                     std::to_string(k));
        udf_search_params p = params(k);
        if (c.weighted) {
          p.captures = &cap;
          p.n_captures = 1;
        }
        const Data q = make_data(rng, UDF_DTYPE_F32, batch, dim);
        Result tiled, row_a_lane;
        ASSERT_EQ(rows_call(od.m, metric, base, Where::Device, q, p, tiled), UDF_OK) << udf_last_error();
        ASSERT_EQ(udf_testing_paths(kPathNoTile), UDF_OK) << udf_last_error();
        const udf_status s = rows_call(od.m, metric, base, Where::Device, q, p, row_a_lane);
        ASSERT_EQ(udf_testing_paths(0), UDF_OK) << udf_last_error();
        ASSERT_EQ(s, UDF_OK) << udf_last_error();
        EXPECT_EQ(tiled.ids, row_a_lane.ids);
        EXPECT_EQ(0, std::memcmp(tiled.dist.data(), row_a_lane.dist.data(), tiled.dist.size() * 4));
        if (!c.max_order && batch < 1000) expect_best(base, q, tiled, k, ref, 1e-4);
      }
    }
  }
}

// Filters: the built-in bitmap (the same rows for every query) and a
// per-query one (query q keeps the rows r with r % 7 == q % 7), for a v1
// and an ABI v2 metric; a bitmap that keeps fewer rows than k pads with -1.
TEST_F(ExactTest, FilteredSearchesScoreOnlyTheKeptRows) {
  REQUIRE_GPU();
  for (const char* art : {"f16_l2.udfa", "v2/l2_state_f32.udfa"}) {
    SCOPED_TRACE(art);
    OnDemand od({art, builtin_artifact("filters", "bitmap.udfa"), "filters/query_group.udfa"});
    ASSERT_NE(od.m, nullptr);
    const udf_dtype dt = std::string(art).find("f16") != std::string::npos ? UDF_DTYPE_F16 : UDF_DTYPE_F32;
    const Data base = make_data(rng, dt, 4000, 32);
    const Data q = make_data(rng, dt, 100, 32);
    // Bitmap: every third row, and then only 10 rows.
    for (int keep_every : {3, 400}) {
      std::vector<uint8_t> bits((base.rows + 7) / 8, 0);
      for (int64_t i = 0; i < base.rows; i += keep_every) bits[i / 8] |= uint8_t(1u << (i % 8));
      udf_tensor bt = udf::tensor(bits.data(), UDF_DTYPE_U8, int64_t(bits.size()), 1);
      const std::vector<udf_capture_binding> fc = {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, 0}};
      std::vector<udf_capture_binding> fcaps = fc;
      fcaps[1].i32 = static_cast<int32_t>(base.rows);
      for (uint32_t k : {1u, 10u, 100u, 1024u}) {
        udf_search_params p = params(k);
        p.filter = "udf_builtin_bitmap";
        p.filter_captures = fcaps.data();
        p.n_filter_captures = fcaps.size();
        Result r;
        ASSERT_EQ(rows_call(od.m, od.metric(), base, Where::Host, q, p, r), UDF_OK) << udf_last_error();
        expect_best(base, q, r, k, l2, 1e-4, [&](int64_t, int64_t id) { return id % keep_every == 0; });
      }
    }
    // Per query, at batches 1 and 10000.
    udf_capture_binding g{"n_groups", nullptr, 0, 0};
    g.i32 = 7;
    udf_search_params p = params(10);
    p.filter = "query_group";
    p.filter_captures = &g;
    p.n_filter_captures = 1;
    for (int64_t batch : {1, 10000}) {
      const Data qq = make_data(rng, dt, batch, 32);
      Result r;
      ASSERT_EQ(rows_call(od.m, od.metric(), base, Where::Device, qq, p, r), UDF_OK) << udf_last_error();
      expect_best(base, qq, r, 10, l2, 1e-4, [](int64_t qi, int64_t id) { return id % 7 == qi % 7; });
    }
  }
}

// Refine: each query's candidates (with -1 padding and repeats) re-ranked;
// the results are the brute force over the distinct candidates.  Batches 1,
// 100 and 10000, k 1 to 1024 (k above the candidates: padding).
TEST_F(ExactTest, RefineRanksEachQuerysCandidates) {
  REQUIRE_GPU();
  for (const char* art : {"int8_l2.udfa", "v2/l2_vector_f32.udfa"}) {
    SCOPED_TRACE(art);
    OnDemand od({art});
    ASSERT_NE(od.m, nullptr);
    const udf_dtype dt = std::string(art).find("int8") != std::string::npos ? UDF_DTYPE_I8 : UDF_DTYPE_F32;
    const Data base = make_data(rng, dt, 5000, 48);
    for (int64_t batch : {1, 100, 10000}) {
      const Data q = make_data(rng, dt, batch, 48);
      const int64_t m = batch == 1 ? 1500 : 70;  // one query: more candidates than k 1024
      std::vector<int64_t> cand(batch * m);
      std::uniform_int_distribution<int64_t> row(0, base.rows - 1);
      for (int64_t qi = 0; qi < batch; ++qi)
        for (int64_t j = 0; j < m; ++j) {
          int64_t id = row(rng);
          if (j % 9 == 4) id = -1;                         // padding
          if (j % 11 == 7) id = cand[qi * m + j / 2];      // a repeat (or padding again)
          cand[qi * m + j] = id;
        }
      std::vector<int64_t> sorted = cand;  // each query's, sorted: the reference's membership test
      for (int64_t qi = 0; qi < batch; ++qi) std::sort(sorted.begin() + qi * m, sorted.begin() + (qi + 1) * m);
      for (uint32_t k : {1u, 10u, 100u, 1024u}) {
        if (batch == 10000 && k != 10) continue;
        SCOPED_TRACE("batch " + std::to_string(batch) + ", k " + std::to_string(k));
        Result r;
        ASSERT_EQ(rows_call(od.m, od.metric(), base, Where::Device, q, params(k), r, &cand, m), UDF_OK)
            << udf_last_error();
        expect_best(base, q, r, k, l2, 1e-4, [&](int64_t qi, int64_t id) {
          return std::binary_search(sorted.begin() + qi * m, sorted.begin() + (qi + 1) * m, id);
        });
      }
    }
  }
}

// A candidate that is not a row is an argument error naming it and its
// place; no scan reads it (the kernel drops it): the outputs hold the
// result over the query's other candidates.
TEST_F(ExactTest, RefineRefusesAnIdOutOfRange) {
  REQUIRE_GPU();
  OnDemand od({"f16_l2.udfa"});
  ASSERT_NE(od.m, nullptr);
  const Data base = make_data(rng, UDF_DTYPE_F16, 300, 16);
  const Data q = make_data(rng, UDF_DTYPE_F16, 3, 16);
  for (int64_t bad : {int64_t(300), int64_t(-2), int64_t(1) << 40}) {
    std::vector<int64_t> cand(3 * 4, 5);
    cand[2 * 4 + 1] = bad;
    Result r;
    EXPECT_EQ(rows_call(od.m, od.metric(), base, Where::Host, q, params(2), r, &cand, 4), UDF_ERROR_INVALID_ARGUMENT);
    const std::string msg = udf_last_error();
    EXPECT_NE(msg.find("candidates[2][1] = " + std::to_string(bad)), std::string::npos) << msg;
    EXPECT_NE(msg.find("0 .. 299"), std::string::npos) << msg;
    for (int64_t qi = 0; qi < 3; ++qi) {  // row 5 (four times: once), then padding
      EXPECT_EQ(r.ids[qi * 2], 5) << "query " << qi;
      EXPECT_EQ(r.ids[qi * 2 + 1], -1) << "query " << qi;
    }
  }
}

// Exact search with the built-in l2 through a module linked without the
// rows scans (test/modules/builtin.udfm) is refused, naming the fix; bad
// datasets are refused naming the argument.
TEST_F(ExactTest, ModuleWithoutRowsScansAndBadArguments) {
  REQUIRE_GPU();
  udf_module* m = nullptr;
  ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/builtin.udfm").c_str(), &m), UDF_OK) << udf_last_error();
  const Data base = make_data(rng, UDF_DTYPE_F32, 100, 8);
  const Data q = make_data(rng, UDF_DTYPE_F32, 2, 8);
  Result r;
  EXPECT_EQ(rows_call(m, "udf_builtin_l2", base, Where::Host, q, params(5), r), UDF_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(udf_last_error()).find("udf-link --exact"), std::string::npos) << udf_last_error();
  udf_module_destroy(m);

  OnDemand od({builtin_artifact("metrics", "l2.udfa")});
  ASSERT_NE(od.m, nullptr);
  const Data empty = make_data(rng, UDF_DTYPE_F32, 0, 8);
  EXPECT_EQ(rows_call(od.m, "udf_builtin_l2", empty, Where::Host, q, params(5), r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("dataset"), std::string::npos) << udf_last_error();
  const Data other = make_data(rng, UDF_DTYPE_F32, 100, 9);
  EXPECT_EQ(rows_call(od.m, "udf_builtin_l2", other, Where::Host, q, params(5), r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("dimension"), std::string::npos) << udf_last_error();
  // Exact search's ties go to the smaller row: a dataset of one row repeated.
  Data same = make_data(rng, UDF_DTYPE_F32, 1, 8);
  for (int i = 0; i < 6; ++i) same.bytes.insert(same.bytes.end(), same.bytes.begin(), same.bytes.begin() + 32);
  same.rows = 7;
  ASSERT_EQ(rows_call(od.m, "udf_builtin_l2", same, Where::Host, q, params(7), r), UDF_OK) << udf_last_error();
  for (int64_t qi = 0; qi < 2; ++qi)
    for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(r.ids[qi * 7 + i], i);
}

}  // namespace

namespace {

// A module whose index scans are loaded too (an IVF search ran on it) keeps
// exact search on its rows scans, call after call: the scan choice between a
// pruning scan and its plain twin never mixes the layouts.
TEST_F(ExactTest, ExactSearchBesideAnIndexOfTheSameModule) {
  REQUIRE_GPU();
  OnDemand od({builtin_artifact("metrics", "l2.udfa")});
  ASSERT_NE(od.m, nullptr);
  const Data base = make_data(rng, UDF_DTYPE_F32, 3000, 40);
  udf_index* ix = build_index(od.m, "udf_builtin_l2", base, 16);
  ASSERT_NE(ix, nullptr);
  for (int round = 0; round < 6; ++round) {
    const Data q = make_data(rng, UDF_DTYPE_F32, round % 2 ? 100 : 1, 40);
    Result r;
    ASSERT_EQ(search(ix, q, 10, 4, r), UDF_OK) << udf_last_error();
    for (uint32_t k : {5u, 100u}) {
      ASSERT_EQ(rows_call(od.m, "udf_builtin_l2", base, Where::Host, q, params(k), r), UDF_OK) << udf_last_error();
      expect_best(base, q, r, k, l2, 1e-4);
    }
  }
  udf_index_destroy(ix);
}

}  // namespace
