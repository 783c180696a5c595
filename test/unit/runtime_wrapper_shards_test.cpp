// The C++ wrapper's indexes over several GPUs (include/udf/runtime.hpp:
// Index::build_sharded, load_sharded, shard_count, shard_info, shards,
// shard_layout, shard_transport; shard_layout_from_name / shard_layout_name).
// The C API itself is tested in runtime_shards_test.cpp; here the wrapper: its
// own argument checks and the layout names without a GPU, and on one GPU two
// and three shards of device 0 (the contract's "a device may appear more than
// once", the same Module passed at every position), by lists and by vectors,
// against the one-GPU index over the same data, bit for bit.  GPU tests skip
// with the reason without a driver or device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "udf/runtime.h"
#include "udf/runtime.hpp"
#include "wrapper_gpu.h"

namespace {

udf_index_params params(uint32_t n_lists) {
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = n_lists;
  p.kmeans_iters = 10;
  return p;
}

// Ids and distances of a host search, k x n.
struct Result {
  std::vector<float> dist;
  std::vector<int64_t> ids;
};

Result search(udf::Index& ix, const std::vector<float>& q, int64_t n, int64_t dim, uint32_t k, uint32_t probes) {
  Result r{std::vector<float>(size_t(n) * k), std::vector<int64_t>(size_t(n) * k, -2)};
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.k = k;
  sp.n_probes = probes;
  ix.search(udf::tensor(q.data(), UDF_DTYPE_F32, n, dim), sp, udf::tensor(r.dist.data(), UDF_DTYPE_F32, n, k),
            udf::tensor(r.ids.data(), UDF_DTYPE_I64, n, k));
  return r;
}

void expect_same_bits(const Result& a, const Result& b, const std::string& what) {
  ASSERT_EQ(a.dist.size(), b.dist.size()) << what;
  EXPECT_EQ(std::memcmp(a.dist.data(), b.dist.data(), a.dist.size() * sizeof(float)), 0) << what << ": distances";
  EXPECT_EQ(a.ids, b.ids) << what << ": ids";
}

// The shard plan of `layout`: by lists, the lists cut into contiguous ranges,
// in order, covering [0, n_lists); by vectors, every shard every list, each
// shard within n_lists vectors of an equal share (each list cut into equal
// parts).  Either way the sizes add up to the index's.
void expect_plan(const udf::Index& ix, size_t shards, int32_t device, udf_shard_layout layout) {
  const udf_index_info info = ix.info();
  ASSERT_EQ(ix.shard_count(), shards);
  EXPECT_EQ(ix.shard_layout(), layout);
  const std::vector<udf_shard_info> plan = ix.shards();
  ASSERT_EQ(plan.size(), shards);
  uint32_t next = 0;
  int64_t total = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    SCOPED_TRACE("shard " + std::to_string(i));
    EXPECT_EQ(plan[i].device, device);
    EXPECT_EQ(plan[i].layout, uint32_t(layout));
    if (layout == UDF_SHARD_BY_LISTS) {
      EXPECT_EQ(plan[i].list_begin, next);
      EXPECT_LE(plan[i].list_begin, plan[i].list_end);
      next = plan[i].list_end;
    } else {
      EXPECT_EQ(plan[i].list_begin, 0u);
      EXPECT_EQ(plan[i].list_end, info.n_lists);
      next = info.n_lists;
      const double share = double(info.size) / double(shards);
      EXPECT_LE(std::abs(double(plan[i].size) - share), double(info.n_lists)) << plan[i].size << " vectors";
    }
    const udf_shard_info one = ix.shard_info(i);
    EXPECT_EQ(std::memcmp(&one, &plan[i], sizeof one), 0);
    total += plan[i].size;
  }
  EXPECT_EQ(next, info.n_lists);
  EXPECT_EQ(total, info.size);
  EXPECT_THROW(ix.shard_info(shards), udf::RuntimeError);
}


#define NEED_GPU()                                          \
  do {                                                      \
    if (!gpu().mod) GTEST_SKIP() << gpu().reason;           \
  } while (0)

}  // namespace

TEST(RuntimeWrapperShards, NullModuleIsRefusedBeforeTheCall) {
  const udf_index_params p = params(4);
  std::vector<float> x(64);
  const udf_tensor t = udf::tensor(x.data(), UDF_DTYPE_F32, 16, 4);
  for (const auto& modules : {std::vector<udf::Module*>{nullptr}, std::vector<udf::Module*>{nullptr, nullptr}}) {
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE(call == 0 ? "build_sharded" : "build_sharded with a layout");
      try {
        if (call == 0) udf::Index::build_sharded(modules, "udf_builtin_l2", t, p);
        else udf::Index::build_sharded(modules, "udf_builtin_l2", t, p, UDF_SHARD_BY_LISTS);
        ADD_FAILURE() << "no exception";
      } catch (const udf::RuntimeError& e) {
        EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("modules[0] is null"), std::string::npos) << e.what();
      }
    }
    for (udf_shard_layout layout : {UDF_SHARD_DEFAULT, UDF_SHARD_BY_LISTS, UDF_SHARD_BY_VECTORS}) {
      try {
        udf::Index::load_sharded(modules, "/nonexistent.udfi", layout);
        ADD_FAILURE() << "no exception";
      } catch (const udf::RuntimeError& e) {
        EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
      }
    }
  }
}

// The names udf-run's --shard-layout and Python's shard_layout= take.
TEST(RuntimeWrapperShards, LayoutNames) {
  EXPECT_EQ(udf::shard_layout_from_name("vectors"), UDF_SHARD_BY_VECTORS);
  EXPECT_EQ(udf::shard_layout_from_name("lists"), UDF_SHARD_BY_LISTS);
  EXPECT_STREQ(udf::shard_layout_name(UDF_SHARD_BY_VECTORS), "vectors");
  EXPECT_STREQ(udf::shard_layout_name(UDF_SHARD_BY_LISTS), "lists");
  EXPECT_STREQ(udf::shard_layout_name(UDF_SHARD_DEFAULT), "vectors");  // the default is by vectors
  EXPECT_EQ(udf::shard_layout_name(3), nullptr);
  for (const char* bad : {"", "Vectors", "list", "default", "by_lists", "1"}) {
    try {
      udf::shard_layout_from_name(bad);
      ADD_FAILURE() << "no exception for '" << bad << "'";
    } catch (const udf::RuntimeError& e) {
      EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("shard layout '" + std::string(bad) + "' is neither 'vectors' nor 'lists'"),
                std::string::npos)
          << e.what();
    }
  }
}

namespace {

const char* layout_label(udf_shard_layout l) {
  return l == UDF_SHARD_DEFAULT ? "default layout" : l == UDF_SHARD_BY_LISTS ? "by lists" : "by vectors";
}
udf_shard_layout effective(udf_shard_layout l) { return l == UDF_SHARD_DEFAULT ? UDF_SHARD_BY_VECTORS : l; }

}  // namespace

TEST(RuntimeWrapperShards, ShardsOfOneDeviceSearchLikeTheOneGpuIndex) {
  NEED_GPU();
  udf::Module& m = *gpu().mod;
  constexpr int64_t kRows = 6000, kDim = 32, kQueries = 40, kExtra = 700;
  constexpr uint32_t kLists = 24;
  std::mt19937 rng(20260101);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> centres(8 * kDim), data(kRows * kDim), queries(kQueries * kDim), extra(kExtra * kDim);
  for (float& c : centres) c = 4.0f * noise(rng);
  for (int64_t r = 0; r < kRows + kQueries + kExtra; ++r) {
    float* row = r < kRows ? &data[r * kDim]
                 : r < kRows + kQueries ? &queries[(r - kRows) * kDim]
                                        : &extra[(r - kRows - kQueries) * kDim];
    const float* c = &centres[(r % 8) * kDim];
    for (int64_t j = 0; j < kDim; ++j) row[j] = c[j] + noise(rng);
  }
  const udf_tensor dv = udf::tensor(data.data(), UDF_DTYPE_F32, kRows, kDim);
  const udf_tensor ev = udf::tensor(extra.data(), UDF_DTYPE_F32, kExtra, kDim);
  const udf_index_params p = params(kLists);
  const std::string dir = ::testing::TempDir();
  constexpr udf_shard_layout kLayouts[] = {UDF_SHARD_DEFAULT, UDF_SHARD_BY_LISTS, UDF_SHARD_BY_VECTORS};

  for (const char* metric : {"udf_builtin_l2", "udf_builtin_inner_product"}) {  // min and max order
    SCOPED_TRACE(metric);
    udf::Index one = udf::Index::build(m, metric, dv, p);
    expect_plan(one, 1, 0, UDF_SHARD_BY_LISTS);  // a one-GPU index reports by lists
    EXPECT_EQ(one.shard_transport(), "none");
    const udf_shard_info whole = one.shard_info(0);
    EXPECT_EQ(whole.list_begin, 0u);
    EXPECT_EQ(whole.list_end, kLists);
    EXPECT_EQ(whole.size, kRows);
    udf::Index one_added = udf::Index::build(m, metric, dv, p);
    one_added.add(ev);
    EXPECT_TRUE(one.coarse_weights().empty());
    {  // Index::coarse_weights: what the build was given
      std::vector<float> w(kDim);
      for (int64_t j = 0; j < kDim; ++j) w[j] = 0.25f * float(j % 5);
      udf_index_params pw = p;
      pw.coarse_weights = w.data();
      EXPECT_TRUE(udf::Index::build(m, metric, dv, pw).coarse_weights() == w);
    }

    for (udf_shard_layout layout : kLayouts) {
      SCOPED_TRACE(layout_label(layout));
      const udf_shard_layout want_layout = effective(layout);
      for (size_t n_shards : {2u, 3u}) {
        SCOPED_TRACE(std::to_string(n_shards) + " shards");
        const std::vector<udf::Module*> modules(n_shards, &m);
        // The layout in the params (UDF_SHARD_DEFAULT: the params' default) and beside them.
        udf_index_params lp = p;
        lp.shard_layout = layout;
        udf::Index sharded = udf::Index::build_sharded(modules, metric, dv, lp);
        udf::Index beside = udf::Index::build_sharded(modules, metric, dv, p, layout);
        expect_plan(sharded, n_shards, 0, want_layout);
        expect_plan(beside, n_shards, 0, want_layout);
        EXPECT_EQ(sharded.shard_transport(), "peer");  // a device listed twice: no NCCL
        const udf_index_info a = one.info(), b = sharded.info();
        EXPECT_EQ(std::string(a.metric), std::string(b.metric));
        EXPECT_EQ(std::make_tuple(a.dim, a.n_lists, a.max_list_size, a.size),
                  std::make_tuple(b.dim, b.n_lists, b.max_list_size, b.size));

        const std::string path = dir + "/wrapper_shards_" + metric + "_" + std::to_string(int(layout)) + "_" +
                                 std::to_string(n_shards) + ".udfi";
        sharded.save(path);
        udf::Index reloaded_one = udf::Index::load(m, path);
        udf::Index reloaded_default = udf::Index::load_sharded(modules, path);  // by vectors
        udf::Index reloaded_lists = udf::Index::load_sharded(modules, path, UDF_SHARD_BY_LISTS);
        udf::Index reloaded_vectors = udf::Index::load_sharded(modules, path, UDF_SHARD_BY_VECTORS);
        expect_plan(reloaded_one, 1, 0, UDF_SHARD_BY_LISTS);
        expect_plan(reloaded_default, n_shards, 0, UDF_SHARD_BY_VECTORS);
        expect_plan(reloaded_lists, n_shards, 0, UDF_SHARD_BY_LISTS);
        expect_plan(reloaded_vectors, n_shards, 0, UDF_SHARD_BY_VECTORS);
        for (uint32_t k : {10u, 100u}) {
          for (uint32_t probes : {4u, kLists}) {
            const std::string what = "k " + std::to_string(k) + ", n_probes " + std::to_string(probes);
            const Result want = search(one, queries, kQueries, kDim, k, probes);
            expect_same_bits(search(sharded, queries, kQueries, kDim, k, probes), want, what);
            expect_same_bits(search(beside, queries, kQueries, kDim, k, probes), want, what + " (layout beside)");
            expect_same_bits(search(reloaded_one, queries, kQueries, kDim, k, probes), want, what + " (loaded)");
            expect_same_bits(search(reloaded_default, queries, kQueries, kDim, k, probes), want,
                             what + " (loaded sharded)");
            expect_same_bits(search(reloaded_lists, queries, kQueries, kDim, k, probes), want,
                             what + " (loaded by lists)");
            expect_same_bits(search(reloaded_vectors, queries, kQueries, kDim, k, probes), want,
                             what + " (loaded by vectors)");
          }
        }
        // An add keeps the layout and the one-GPU index's results.
        sharded.add(ev);
        expect_plan(sharded, n_shards, 0, want_layout);
        expect_same_bits(search(sharded, queries, kQueries, kDim, 10, 4),
                         search(one_added, queries, kQueries, kDim, 10, 4), "after add");
        std::remove(path.c_str());
      }
      // build_chunked over one chunk (the whole data): the build's index, in the params' layout.
      udf_index_params cp = p;
      cp.shard_layout = layout;
      const std::vector<udf::Module*> two(2, &m);
      udf::Index chunked = udf::Index::build_chunked(
          two, metric, 1, [&](size_t, udf_tensor& d, udf_tensor&) { d = dv; }, cp);
      expect_plan(chunked, 2, 0, want_layout);
      expect_same_bits(search(chunked, queries, kQueries, kDim, 10, 4), search(one, queries, kQueries, kDim, 10, 4),
                       "chunked");
    }
  }
}

TEST(RuntimeWrapperShards, LayoutOutOfRangeIsRefused) {
  NEED_GPU();
  udf::Module& m = *gpu().mod;
  std::vector<float> x(400 * 8);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  for (float& v : x) v = noise(rng);
  const udf_tensor t = udf::tensor(x.data(), UDF_DTYPE_F32, 400, 8);
  const std::vector<udf::Module*> two(2, &m);
  udf_index_params p = params(4);
  p.shard_layout = 3;
  try {
    udf::Index::build_sharded(two, "udf_builtin_l2", t, p);
    ADD_FAILURE() << "no exception";
  } catch (const udf::RuntimeError& e) {
    EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("shard_layout = 3"), std::string::npos) << e.what();
  }
  const std::string path = ::testing::TempDir() + "/wrapper_shards_bad_layout.udfi";
  udf::Index::build(m, "udf_builtin_l2", t, params(4)).save(path);
  try {
    udf::Index::load_sharded(two, path, static_cast<udf_shard_layout>(7));
    ADD_FAILURE() << "no exception";
  } catch (const udf::RuntimeError& e) {
    EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("shard_layout = 7"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}
