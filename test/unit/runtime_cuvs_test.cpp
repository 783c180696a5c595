// udf_index_load_cuvs and udf_index_file_from_cuvs (include/udf/runtime.h)
// over libudf_runtime.so, with the cuvs_file fuzz target's seeds (files in
// the layout cuVS writes: test/fuzz/make_seeds.py).  Without a GPU: the file
// is checked before the module (a foreign file is UDF_ERROR_BAD_FORMAT
// naming the field, a missing one UDF_ERROR_IO), and the conversion to an
// index file loads as far as the module.  On one GPU (skipped with the
// reason without one), with test/modules/builtin.udfm (f32 metrics): cuVS's
// lists searched with the built-in l2, and metrics of another coarse metric
// or element type refused.  python/tests/test_cuvs.py tests real cuVS indexes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "udf/runtime.h"
#include "udf/runtime.hpp"
#include "wrapper_gpu.h"

namespace {

std::string seed(const std::string& name) {
  const char* src = std::getenv("UDF_TEST_SOURCE_DIR");  // a copy on another machine
  return std::string(src ? src : UDF_SOURCE_DIR) + "/test/fuzz/corpus/cuvs_file/seed-" + name + ".cuvs";
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "runtime_cuvs_test-" + name;
}

bool last_error_has(const std::string& text) { return std::string(udf_last_error()).find(text) != std::string::npos; }

TEST(RuntimeCuvs, TheFileIsCheckedBeforeTheModule) {
  udf_index* ix = reinterpret_cast<udf_index*>(1);
  EXPECT_EQ(udf_index_load_cuvs(nullptr, "l2", seed("f32-l2").c_str(), nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_load_cuvs(nullptr, "l2", temp_path("missing.cuvs").c_str(), &ix), UDF_ERROR_IO);
  EXPECT_EQ(ix, nullptr);
  EXPECT_EQ(udf_index_load_cuvs(nullptr, "l2", nullptr, &ix), UDF_ERROR_INVALID_ARGUMENT);
  // An index file of this runtime, or a FAISS file, is no cuVS file.
  const std::string udfi = temp_path("seed.udfi");
  ASSERT_EQ(udf_index_file_from_cuvs(seed("f32-l2").c_str(), "udf_builtin_l2", "key", udfi.c_str()), UDF_OK)
      << udf_last_error();
  EXPECT_EQ(udf_index_load_cuvs(nullptr, "l2", udfi.c_str(), &ix), UDF_ERROR_BAD_FORMAT);
  EXPECT_TRUE(last_error_has("not a cuVS IVF-Flat file (dtype prefix '\\x89UDF' at byte 0")) << udf_last_error();
  const char* src = std::getenv("UDF_TEST_SOURCE_DIR");
  const std::string faiss = std::string(src ? src : UDF_SOURCE_DIR) + "/test/fuzz/corpus/faiss_file/seed-l2-full.faiss";
  EXPECT_EQ(udf_index_load_cuvs(nullptr, "l2", faiss.c_str(), &ix), UDF_ERROR_BAD_FORMAT);
  EXPECT_TRUE(last_error_has("dtype prefix 'IwFl' at byte 0")) << udf_last_error();
  // A good file reaches the module check.
  EXPECT_EQ(udf_index_load_cuvs(nullptr, "l2", seed("f32-l2").c_str(), &ix), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("module is NULL")) << udf_last_error();
  std::remove(udfi.c_str());
}

TEST(RuntimeCuvs, ConversionGivesAnIndexFile) {
  const std::string udfi = temp_path("conv.udfi");
  for (const char* name : {"f32-l2", "f32-ip-u4-metric", "f16-cosine", "i8-l2-veclen1", "u8-ip"}) {
    ASSERT_EQ(udf_index_file_from_cuvs(seed(name).c_str(), "udf_builtin_l2", "key", udfi.c_str()), UDF_OK)
        << name << ": " << udf_last_error();
    udf_index* ix = nullptr;
    // The file passes udf_index_load's checks up to the module.
    EXPECT_EQ(udf_index_load(nullptr, udfi.c_str(), &ix), UDF_ERROR_INVALID_ARGUMENT) << name;
    EXPECT_TRUE(last_error_has("module is NULL")) << udf_last_error();
  }
  EXPECT_EQ(udf_index_file_from_cuvs(seed("f32-l2").c_str(), nullptr, "key", udfi.c_str()),
            UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_index_file_from_cuvs(seed("f32-l2").c_str(), "l2", "key", ""), UDF_ERROR_INVALID_ARGUMENT);
  std::remove(udfi.c_str());
}

// seed-f32-l2: dim 4, lists {0, 2}, {1}, {}; id 0 holds (0, 1, 2, 3), id 2 (3, 4, 5, 6), id 1 (7, 8, 9, 10).
TEST(RuntimeCuvsGpu, BuiltinL2SearchesCuvsLists) {
  if (!gpu().mod) GTEST_SKIP() << gpu().reason;
  udf::Index ix = udf::Index::load_cuvs(*gpu().mod, "udf_builtin_l2", seed("f32-l2"));
  const udf_index_info info = ix.info();
  EXPECT_EQ(info.dim, 4u);
  EXPECT_EQ(info.n_lists, 3u);
  EXPECT_EQ(info.size, 3);
  std::vector<uint32_t> sizes(3);
  ASSERT_EQ(udf_index_list_sizes(ix.get(), sizes.data(), sizes.size()), UDF_OK) << udf_last_error();
  EXPECT_EQ(sizes, (std::vector<uint32_t>{2, 1, 0}));
  const std::vector<float> q = {3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> dist(4);
  std::vector<int64_t> ids(4, -2);
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.k = 2;
  sp.n_probes = 3;
  ix.search(udf::tensor(q.data(), UDF_DTYPE_F32, 2, 4), sp, udf::tensor(dist.data(), UDF_DTYPE_F32, 2, 2),
            udf::tensor(ids.data(), UDF_DTYPE_I64, 2, 2));
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 0, 1, 2}));
  EXPECT_EQ(dist, (std::vector<float>{0, 36, 0, 64}));
}

TEST(RuntimeCuvsGpu, AnotherCoarseMetricOrElementTypeIsAMismatch) {
  if (!gpu().mod) GTEST_SKIP() << gpu().reason;
  udf_index* ix = nullptr;
  EXPECT_EQ(udf_index_load_cuvs(gpu().mod->get(), "udf_builtin_inner_product", seed("f32-l2").c_str(), &ix),
            UDF_ERROR_MISMATCH);
  EXPECT_TRUE(last_error_has("has coarse metric inner_product; the cuVS index's lists were clustered with "
                             "L2Expanded (l2)")) << udf_last_error();
  EXPECT_EQ(udf_index_load_cuvs(gpu().mod->get(), "udf_builtin_cosine", seed("f32-ip-u4-metric").c_str(), &ix),
            UDF_ERROR_MISMATCH);
  EXPECT_TRUE(last_error_has("has coarse metric cosine; the cuVS index's lists were clustered with InnerProduct "
                             "(inner_product)")) << udf_last_error();
  EXPECT_EQ(udf_index_load_cuvs(gpu().mod->get(), "udf_builtin_cosine", seed("f16-cosine").c_str(), &ix),
            UDF_ERROR_MISMATCH);
  EXPECT_TRUE(last_error_has("takes f32 elements; the cuVS index holds f16 vectors")) << udf_last_error();
  EXPECT_EQ(ix, nullptr);
}

// seed-f32-ip-u4-metric (metric written as '<u4', as cuVS before 25.12 does): dim 3, lists {5}, {6, 7};
// id 5 holds (2, 3, 4), id 6 (9, 10, 0), id 7 (5, 6, 7): their inner products with (1, 1, 1) are 9, 19, 18.
TEST(RuntimeCuvsGpu, InnerProductSearchesCuvsLists) {
  if (!gpu().mod) GTEST_SKIP() << gpu().reason;
  udf::Index ix = udf::Index::load_cuvs(*gpu().mod, "udf_builtin_inner_product", seed("f32-ip-u4-metric"));
  EXPECT_EQ(ix.info().size, 3);
  const std::vector<float> q = {1, 1, 1};
  std::vector<float> dist(3);
  std::vector<int64_t> ids(3, -2);
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.k = 3;
  sp.n_probes = 2;
  ix.search(udf::tensor(q.data(), UDF_DTYPE_F32, 1, 3), sp, udf::tensor(dist.data(), UDF_DTYPE_F32, 1, 3),
            udf::tensor(ids.data(), UDF_DTYPE_I64, 1, 3));
  EXPECT_EQ(ids, (std::vector<int64_t>{6, 7, 5}));
}

}  // namespace
