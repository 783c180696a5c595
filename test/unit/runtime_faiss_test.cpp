// udf_index_load_faiss and udf_index_file_from_faiss (include/udf/runtime.h)
// over libudf_runtime.so, with the faiss_file fuzz target's seeds (files
// faiss-cpu reads and writes back byte for byte: test/fuzz/make_seeds.py).
// Without a GPU: the file is checked before the module (a foreign file is
// UDF_ERROR_BAD_FORMAT naming the field, a missing one UDF_ERROR_IO), and the
// conversion to an index file loads as far as the module.  On one GPU (skipped
// with the reason without one), with test/modules/builtin.udfm: FAISS's lists
// searched with the built-in l2, and the metrics of another coarse metric
// refused.  python/tests/test_faiss.py tests real faiss-cpu indexes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "udf/runtime.h"
#include "udf/runtime.hpp"
#include "wrapper_gpu.h"

namespace {

// The source tree: $UDF_TEST_SOURCE_DIR (a copy on another machine), else this build's.
std::string seed(const std::string& name) {
  const char* src = std::getenv("UDF_TEST_SOURCE_DIR");
  return std::string(src ? src : UDF_SOURCE_DIR) + "/test/fuzz/corpus/faiss_file/seed-" + name + ".faiss";
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "runtime_faiss_test-" + name;
}

bool last_error_has(const std::string& text) { return std::string(udf_last_error()).find(text) != std::string::npos; }

TEST(RuntimeFaiss, TheFileIsCheckedBeforeTheModule) {
  udf_index* ix = reinterpret_cast<udf_index*>(1);
  EXPECT_EQ(udf_index_load_faiss(nullptr, "l2", seed("l2-full").c_str(), nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_load_faiss(nullptr, "l2", temp_path("missing.faiss").c_str(), &ix), UDF_ERROR_IO);
  EXPECT_EQ(ix, nullptr);
  EXPECT_EQ(udf_index_load_faiss(nullptr, "l2", nullptr, &ix), UDF_ERROR_INVALID_ARGUMENT);
  // An index file of this runtime is no FAISS file.
  const std::string udfi = temp_path("seed.udfi");
  ASSERT_EQ(udf_index_file_from_faiss(seed("l2-full").c_str(), "udf_builtin_l2", "key", udfi.c_str()), UDF_OK)
      << udf_last_error();
  EXPECT_EQ(udf_index_load_faiss(nullptr, "l2", udfi.c_str(), &ix), UDF_ERROR_BAD_FORMAT);
  EXPECT_TRUE(last_error_has("not a FAISS IndexIVFFlat file (fourcc '\\x89UDF' at byte 0")) << udf_last_error();
  // A good file reaches the module check.
  EXPECT_EQ(udf_index_load_faiss(nullptr, "l2", seed("l2-full").c_str(), &ix), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("module is NULL")) << udf_last_error();
  std::remove(udfi.c_str());
}

TEST(RuntimeFaiss, ConversionGivesAnIndexFile) {
  const std::string udfi = temp_path("conv.udfi");
  for (const char* name : {"l2-full", "ip-full", "l2-sparse", "l2-direct-map"}) {
    ASSERT_EQ(udf_index_file_from_faiss(seed(name).c_str(), "udf_builtin_l2", "key", udfi.c_str()), UDF_OK)
        << name << ": " << udf_last_error();
    udf_index* ix = nullptr;
    // The file passes udf_index_load's checks up to the module.
    EXPECT_EQ(udf_index_load(nullptr, udfi.c_str(), &ix), UDF_ERROR_INVALID_ARGUMENT) << name;
    EXPECT_TRUE(last_error_has("module is NULL")) << udf_last_error();
  }
  EXPECT_EQ(udf_index_file_from_faiss(seed("l2-full").c_str(), nullptr, "key", udfi.c_str()),
            UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_file_from_faiss(seed("l2-full").c_str(), "l2", "key", ""), UDF_ERROR_INVALID_ARGUMENT);
  std::remove(udfi.c_str());
}


// seed-l2-full: dim 4, lists {0, 2}, {1}, {}; ids 0 and 1 hold (0, 1, 2, 3), id 2 (4, 5, 6, 7).
TEST(RuntimeFaissGpu, BuiltinL2SearchesFaissLists) {
  if (!gpu().mod) GTEST_SKIP() << gpu().reason;
  udf::Index ix = udf::Index::load_faiss(*gpu().mod, "udf_builtin_l2", seed("l2-full"));
  const udf_index_info info = ix.info();
  EXPECT_EQ(info.dim, 4u);
  EXPECT_EQ(info.n_lists, 3u);
  EXPECT_EQ(info.size, 3);
  std::vector<uint32_t> sizes(3);
  ASSERT_EQ(udf_index_list_sizes(ix.get(), sizes.data(), sizes.size()), UDF_OK) << udf_last_error();
  EXPECT_EQ(sizes, (std::vector<uint32_t>{2, 1, 0}));
  const std::vector<float> q = {4, 5, 6, 7, 0, 1, 2, 3};
  std::vector<float> dist(4);
  std::vector<int64_t> ids(4, -2);
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.k = 2;
  sp.n_probes = 3;
  ix.search(udf::tensor(q.data(), UDF_DTYPE_F32, 2, 4), sp, udf::tensor(dist.data(), UDF_DTYPE_F32, 2, 2),
            udf::tensor(ids.data(), UDF_DTYPE_I64, 2, 2));
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(dist[0], 0.0f);
  EXPECT_EQ(dist[1], 64.0f);  // ids 0 and 1: (4 x 4^2)
  EXPECT_EQ(dist[2], 0.0f);
  EXPECT_EQ(dist[3], 0.0f);
  EXPECT_TRUE((ids[2] == 0 && ids[3] == 1) || (ids[2] == 1 && ids[3] == 0)) << ids[2] << " " << ids[3];
}

TEST(RuntimeFaissGpu, AnotherCoarseMetricIsAMismatch) {
  if (!gpu().mod) GTEST_SKIP() << gpu().reason;
  udf_index* ix = nullptr;
  EXPECT_EQ(udf_index_load_faiss(gpu().mod->get(), "udf_builtin_inner_product", seed("l2-full").c_str(), &ix),
            UDF_ERROR_MISMATCH);
  EXPECT_TRUE(last_error_has("has coarse metric inner_product; the FAISS index's lists were clustered with "
                             "METRIC_L2 (l2)")) << udf_last_error();
  EXPECT_EQ(udf_index_load_faiss(gpu().mod->get(), "udf_builtin_cosine", seed("ip-full").c_str(), &ix),
            UDF_ERROR_MISMATCH);
  EXPECT_TRUE(last_error_has("has coarse metric cosine")) << udf_last_error();
  EXPECT_EQ(ix, nullptr);
}

}  // namespace
