// The C++ wrapper's indexes over several GPUs (include/udf/runtime.hpp:
// Index::build_sharded, load_sharded, shard_count, shard_info, shards,
// shard_transport).  The C API itself is tested in runtime_shards_test.cpp;
// here the wrapper: its own argument check without a GPU, and on one GPU two
// and three shards of device 0 (the contract's "a device may appear more than
// once", the same Module passed at every position) against the one-GPU index
// over the same data, bit for bit.  GPU tests skip with the reason without a
// driver or device.
#include <gtest/gtest.h>

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

namespace {

std::string module_path() {
  if (const char* e = std::getenv("UDF_TEST_MODULE_DIR")) return std::string(e) + "/builtin.udfm";
  return std::string(UDF_TEST_BINARY_DIR) + "/modules/builtin.udfm";
}

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

// The lists cut into contiguous ranges, in order, covering [0, n_lists); sizes
// add up to the index's.
void expect_plan(const udf::Index& ix, size_t shards, int32_t device) {
  const udf_index_info info = ix.info();
  ASSERT_EQ(ix.shard_count(), shards);
  const std::vector<udf_shard_info> plan = ix.shards();
  ASSERT_EQ(plan.size(), shards);
  uint32_t next = 0;
  int64_t total = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    SCOPED_TRACE("shard " + std::to_string(i));
    EXPECT_EQ(plan[i].device, device);
    EXPECT_EQ(plan[i].list_begin, next);
    EXPECT_LE(plan[i].list_begin, plan[i].list_end);
    const udf_shard_info one = ix.shard_info(i);
    EXPECT_EQ(std::memcmp(&one, &plan[i], sizeof one), 0);
    next = plan[i].list_end;
    total += plan[i].size;
  }
  EXPECT_EQ(next, info.n_lists);
  EXPECT_EQ(total, info.size);
  EXPECT_THROW(ix.shard_info(shards), udf::RuntimeError);
}

// Device 0's runtime and the built-in metrics' module, or why not.
struct Gpu {
  std::optional<udf::Runtime> rt;
  std::optional<udf::Module> mod;
  std::string reason;
  Gpu() {
    try {
      rt.emplace(0);
    } catch (const udf::RuntimeError& e) {
      reason = e.what();
      return;
    }
    if (!std::ifstream(module_path()).good()) {
      reason = "no test module " + module_path() + " (build runtime_test_modules)";
      return;
    }
    mod.emplace(udf::Module::load_file(*rt, module_path()));
  }
};

Gpu& gpu() {
  static Gpu g;
  return g;
}

#define NEED_GPU()                                          \
  do {                                                      \
    if (!gpu().mod) GTEST_SKIP() << gpu().reason;           \
  } while (0)

}  // namespace

TEST(RuntimeWrapperShards, NullModuleIsRefusedBeforeTheCall) {
  const udf_index_params p = params(4);
  std::vector<float> x(64);
  for (const auto& modules : {std::vector<udf::Module*>{nullptr}, std::vector<udf::Module*>{nullptr, nullptr}}) {
    try {
      udf::Index::build_sharded(modules, "udf_builtin_l2", udf::tensor(x.data(), UDF_DTYPE_F32, 16, 4), p);
      ADD_FAILURE() << "no exception";
    } catch (const udf::RuntimeError& e) {
      EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("modules[0] is null"), std::string::npos) << e.what();
    }
    try {
      udf::Index::load_sharded(modules, "/nonexistent.udfi");
      ADD_FAILURE() << "no exception";
    } catch (const udf::RuntimeError& e) {
      EXPECT_EQ(e.status(), UDF_ERROR_INVALID_ARGUMENT);
    }
  }
}

TEST(RuntimeWrapperShards, ShardsOfOneDeviceSearchLikeTheOneGpuIndex) {
  NEED_GPU();
  udf::Module& m = *gpu().mod;
  constexpr int64_t kRows = 6000, kDim = 32, kQueries = 40;
  constexpr uint32_t kLists = 24;
  std::mt19937 rng(20260101);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> centres(8 * kDim), data(kRows * kDim), queries(kQueries * kDim);
  for (float& c : centres) c = 4.0f * noise(rng);
  for (int64_t r = 0; r < kRows + kQueries; ++r) {
    float* row = r < kRows ? &data[r * kDim] : &queries[(r - kRows) * kDim];
    const float* c = &centres[(r % 8) * kDim];
    for (int64_t j = 0; j < kDim; ++j) row[j] = c[j] + noise(rng);
  }
  const udf_tensor dv = udf::tensor(data.data(), UDF_DTYPE_F32, kRows, kDim);
  const udf_index_params p = params(kLists);
  const std::string dir = ::testing::TempDir();

  for (const char* metric : {"udf_builtin_l2", "udf_builtin_inner_product"}) {  // min and max order
    SCOPED_TRACE(metric);
    udf::Index one = udf::Index::build(m, metric, dv, p);
    expect_plan(one, 1, 0);
    EXPECT_EQ(one.shard_transport(), "none");
    const udf_shard_info whole = one.shard_info(0);
    EXPECT_EQ(whole.list_begin, 0u);
    EXPECT_EQ(whole.list_end, kLists);
    EXPECT_EQ(whole.size, kRows);

    for (size_t n_shards : {2u, 3u}) {
      SCOPED_TRACE(std::to_string(n_shards) + " shards");
      const std::vector<udf::Module*> modules(n_shards, &m);
      udf::Index sharded = udf::Index::build_sharded(modules, metric, dv, p);
      expect_plan(sharded, n_shards, 0);
      EXPECT_EQ(sharded.shard_transport(), "peer");  // a device listed twice: no NCCL
      const udf_index_info a = one.info(), b = sharded.info();
      EXPECT_EQ(std::string(a.metric), std::string(b.metric));
      EXPECT_EQ(std::make_tuple(a.dim, a.n_lists, a.max_list_size, a.size),
                std::make_tuple(b.dim, b.n_lists, b.max_list_size, b.size));

      const std::string path = dir + "/wrapper_shards_" + metric + "_" + std::to_string(n_shards) + ".udfi";
      sharded.save(path);
      udf::Index reloaded_one = udf::Index::load(m, path);
      udf::Index reloaded_sharded = udf::Index::load_sharded(modules, path);
      expect_plan(reloaded_one, 1, 0);
      expect_plan(reloaded_sharded, n_shards, 0);
      for (uint32_t k : {10u, 100u}) {
        for (uint32_t probes : {4u, kLists}) {
          const std::string what = "k " + std::to_string(k) + ", n_probes " + std::to_string(probes);
          const Result want = search(one, queries, kQueries, kDim, k, probes);
          expect_same_bits(search(sharded, queries, kQueries, kDim, k, probes), want, what);
          expect_same_bits(search(reloaded_one, queries, kQueries, kDim, k, probes), want, what + " (loaded)");
          expect_same_bits(search(reloaded_sharded, queries, kQueries, kDim, k, probes), want,
                           what + " (loaded sharded)");
        }
      }
      std::remove(path.c_str());
    }
  }
}
