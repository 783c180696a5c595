// Runtime tests (include/udf/runtime.h).  CPU-only tests run everywhere; GPU
// tests skip with the reason when there is no driver or device.  Results are
// checked against a float64 CPU reference; outputs are poisoned before each
// search; inputs are fresh random data.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>
#include <unordered_map>
#include <string>
#include <thread>
#include <vector>

#include "udf/runtime.h"
#include "udf/runtime.hpp"

#include "runtime_test_support.h"

// ------------------------------------------------------------------ CPU-only

TEST(RuntimeApi, VersionAndNames) {
  EXPECT_EQ(udf_runtime_api_version(), static_cast<uint32_t>(UDF_RUNTIME_API_VERSION));
  EXPECT_STREQ(udf_status_name(UDF_ERROR_CAPTURE), "UDF_ERROR_CAPTURE");
  EXPECT_STREQ(udf_status_name(static_cast<udf_status>(999)), "UDF_ERROR_UNKNOWN");
  EXPECT_EQ(udf_dtype_size(UDF_DTYPE_F16), 2u);
  EXPECT_STREQ(udf_dtype_name(UDF_DTYPE_F16), "f16");
  EXPECT_STREQ(udf_dtype_name(UDF_DTYPE_I64), "i64");
  EXPECT_EQ(udf_dtype_name(static_cast<udf_dtype>(42)), nullptr);
  udf_index_params p;
  udf_index_params_default(&p);
  EXPECT_EQ(p.n_lists, 1024u);
  udf_search_params s;
  udf_search_params_default(&s);
  EXPECT_EQ(s.k, 10u);
}

// udf_X_init writes exactly the caller's struct_size bytes: the defaults
// over the fields it covers, zero over the fields a newer header would have,
// nothing beyond (runtime.h, "Versioned structs").
template <class T> void check_init_writes_exactly(void (*init)(T*, size_t), const char* what) {
  SCOPED_TRACE(what);
  T full;
  init(&full, sizeof full);
  EXPECT_EQ(full.struct_size, sizeof full);
  constexpr size_t kCanary = 0xCD;
  for (size_t size : {sizeof(T) + 16, sizeof(T), sizeof(size_t) + 4, sizeof(size_t), size_t{4}, size_t{0}}) {
    std::vector<unsigned char> buf(sizeof(T) + 32, kCanary);
    init(reinterpret_cast<T*>(buf.data()), size);
    if (size < sizeof(size_t)) {  // cannot even hold struct_size: untouched
      EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](unsigned char c) { return c == kCanary; })) << size;
      continue;
    }
    size_t got = 0;
    std::memcpy(&got, buf.data(), sizeof got);
    EXPECT_EQ(got, size);
    EXPECT_EQ(std::memcmp(buf.data() + sizeof(size_t), reinterpret_cast<unsigned char*>(&full) + sizeof(size_t),
                          std::min(size, sizeof(T)) - sizeof(size_t)),
              0)
        << "size " << size << ": the defaults";
    for (size_t i = sizeof(T); i < size; ++i) EXPECT_EQ(buf[i], 0) << "size " << size << ": byte " << i;
    for (size_t i = size; i < buf.size(); ++i) ASSERT_EQ(buf[i], kCanary) << "size " << size << ": wrote byte " << i;
  }
}

TEST(RuntimeApi, VersionedStructsInitWritesExactlyTheCallersSize) {
  check_init_writes_exactly<udf_search_params>(udf_search_params_init, "udf_search_params");
  check_init_writes_exactly<udf_index_params>(udf_index_params_init, "udf_index_params");
  check_init_writes_exactly<udf_link_options>(udf_link_options_init, "udf_link_options");
}

TEST(RuntimeApi, NoDriverIsReportedCleanly) {
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) || dlopen("libcuda.so.1", RTLD_NOW))
    GTEST_SKIP() << "a CUDA driver is installed: the no-driver path cannot be exercised here";
  udf_runtime* rt = reinterpret_cast<udf_runtime*>(0x1);
  EXPECT_EQ(udf_runtime_create(0, &rt), UDF_ERROR_NO_DRIVER);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(udf_last_error()).find("no CUDA driver"), std::string::npos) << udf_last_error();
  try {
    udf::Runtime r(0);
    FAIL() << "no exception";
  } catch (const udf::RuntimeError& e) {
    EXPECT_EQ(e.status(), UDF_ERROR_NO_DRIVER);
  }
}

TEST(RuntimeApi, NullAndBadParameters) {
  udf_module* m = reinterpret_cast<udf_module*>(0x1);
  EXPECT_EQ(udf_module_load_file(nullptr, "x.udfm", &m), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(udf_module_load_memory(nullptr, nullptr, 0, nullptr, &m), UDF_ERROR_INVALID_ARGUMENT);
  udf_search_params sp;
  udf_search_params_default(&sp);
  EXPECT_EQ(udf_index_search(nullptr, nullptr, &sp, nullptr, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("index is NULL"), std::string::npos);
  EXPECT_EQ(udf_index_save(nullptr, "/tmp/x"), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_runtime_wait_stream(nullptr, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("runtime is NULL"), std::string::npos);
  udf_index_destroy(nullptr);
  udf_module_destroy(nullptr);
  udf_runtime_destroy(nullptr);
}

namespace {
// A minimal valid index file (format of docs/runtime.md), for format tests without a GPU.
std::vector<uint8_t> crafted_index_file();
}  // namespace

TEST(RuntimeIndexFile, RejectsCorruptFiles) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::vector<uint8_t>& b) {
    std::ofstream(dir + name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
    return dir + name;
  };
  udf_index* ix = reinterpret_cast<udf_index*>(0x1);
  const auto good = crafted_index_file();
  // Well-formed: gets past the format checks to the (missing) module.
  EXPECT_EQ(udf_index_load(nullptr, write("good.udfi", good).c_str(), &ix), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(udf_last_error(), "module is NULL");
  EXPECT_EQ(ix, nullptr);
  EXPECT_EQ(udf_index_load(nullptr, (dir + "missing.udfi").c_str(), &ix), UDF_ERROR_IO);
  for (size_t cut : {size_t(0), size_t(7), size_t(40), good.size() / 2, good.size() - 1}) {
    std::vector<uint8_t> b(good.begin(), good.begin() + cut);
    EXPECT_EQ(udf_index_load(nullptr, write("cut.udfi", b).c_str(), &ix), UDF_ERROR_BAD_FORMAT) << cut;
  }
  auto bad_magic = good;
  bad_magic[1] = 'X';
  EXPECT_EQ(udf_index_load(nullptr, write("magic.udfi", bad_magic).c_str(), &ix), UDF_ERROR_BAD_FORMAT);
  EXPECT_NE(std::string(udf_last_error()).find("bad magic"), std::string::npos) << udf_last_error();
  auto flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  EXPECT_EQ(udf_index_load(nullptr, write("flip.udfi", flipped).c_str(), &ix), UDF_ERROR_BAD_FORMAT);
  EXPECT_NE(std::string(udf_last_error()).find("checksum"), std::string::npos) << udf_last_error();
  auto version = good;
  version[8] = 9;
  EXPECT_EQ(udf_index_load(nullptr, write("ver.udfi", version).c_str(), &ix), UDF_ERROR_BAD_FORMAT);
  EXPECT_NE(std::string(udf_last_error()).find("version 9"), std::string::npos) << udf_last_error();
}

// ------------------------------------------------------------------ GPU

TEST_F(Fixture, ModuleQuery) {
  REQUIRE_GPU();
  size_t n = 0;
  ASSERT_EQ(udf_module_metric_count(udfs, &n), UDF_OK);
  EXPECT_EQ(n, 9u);
  size_t wi = 0;
  ASSERT_EQ(udf_module_find_metric(udfs, "weighted_l2", &wi), UDF_OK);
  udf_metric_info mi;
  ASSERT_EQ(udf_module_metric_info(udfs, wi, &mi), UDF_OK);
  EXPECT_EQ(mi.n_captures, 1u);
  EXPECT_EQ(mi.max_k, 1024u);
  udf_capture_info ci;
  ASSERT_EQ(udf_module_capture_info(udfs, wi, 0, &ci), UDF_OK);
  EXPECT_STREQ(ci.name, "weights");
  EXPECT_EQ(ci.type, UDF_DTYPE_F32);
  EXPECT_EQ(ci.is_array, 1);
  EXPECT_EQ(udf_module_find_metric(udfs, "nope", &wi), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("weighted_l2"), std::string::npos);
}

TEST_F(Fixture, ModuleWithoutCodeForThisGpuFailsAtLoad) {
  REQUIRE_GPU();
  udf_device_info di;
  ASSERT_EQ(udf_runtime_device_info(gpu().rt, &di), UDF_OK);
  if (di.arch >= 100) GTEST_SKIP() << "the GPU is sm_" << di.arch << ": the sm_100 module may run on it";
  udf_module* m = nullptr;
  EXPECT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/l2_sm100.udfm").c_str(), &m), UDF_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(udf_last_error()).find("no code for this GPU"), std::string::npos) << udf_last_error();
  // A corrupt module is rejected before the driver sees it.
  std::ifstream f(module_dir() + "/builtin.udfm", std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
  b[b.size() / 2] ^= 1;
  EXPECT_EQ(udf_module_load_memory(gpu().rt, b.data(), b.size(), "flipped", &m), UDF_ERROR_BAD_FORMAT);
}

struct ExactCase {
  const char* module;  // "builtin", "udfs", "ir_mlir" or "ir_ll"
  const char* metric;
  udf_dtype dtype;
  bool max_order;
  RefFn ref;
  double tol;
  int64_t dim;
};

class Exact : public Fixture, public ::testing::WithParamInterface<int> {};

std::vector<ExactCase> exact_cases() {
  auto cosine = [](const double* x, const double* y, int64_t n) {
    return 1.0 - ip(x, y, n) / std::sqrt(ip(x, x, n) * ip(y, y, n));
  };
  auto linf = [](const double* x, const double* y, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i] - y[i]));
    return m;
  };
  auto l1 = [](const double* x, const double* y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::fabs(x[i] - y[i]);
    return s;
  };
  auto l2s = [](const double* x, const double* y, int64_t n) { return std::sqrt(l2(x, y, n)); };
  auto log_cosh = [](const double* x, const double* y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::log(std::cosh(x[i] - y[i]));
    return s;
  };
  return {
      {"builtin", "udf_builtin_l2", UDF_DTYPE_F32, false, l2, 1e-4, 37},
      {"builtin", "udf_builtin_inner_product", UDF_DTYPE_F32, true, ip, 1e-4, 64},
      {"builtin", "udf_builtin_cosine", UDF_DTYPE_F32, false, cosine, 1e-4, 50},
      {"udfs", "linf", UDF_DTYPE_F32, false, linf, 1e-6, 33},
      {"udfs", "inner_product", UDF_DTYPE_F32, true, ip, 1e-4, 16},
      {"udfs", "l2_sum", UDF_DTYPE_F32, false, l2s, 1e-5, 40},
      {"udfs", "f16_l2", UDF_DTYPE_F16, false, l2, 1e-4, 24},
      {"udfs", "int8_l2", UDF_DTYPE_I8, false, l2, 0, 45},
      {"udfs", "u8_l1", UDF_DTYPE_U8, false, l1, 0, 70},
      // The same metrics written in MLIR and LLVM IR (examples/*.mlir, *.ll).
      {"ir_mlir", "linf", UDF_DTYPE_F32, false, linf, 1e-6, 33},
      {"ir_mlir", "log_cosh", UDF_DTYPE_F32, false, log_cosh, 1e-4, 29},
      {"ir_ll", "linf", UDF_DTYPE_F32, false, linf, 1e-6, 35},
      {"ir_ll", "log_cosh", UDF_DTYPE_F32, false, log_cosh, 1e-4, 31},
  };
}

TEST_P(Exact, AllListsProbedMatchesFloat64) {
  REQUIRE_GPU();
  const ExactCase c = exact_cases()[GetParam()];
  SCOPED_TRACE(c.metric);
  udf_module* m = module(c.module);
  const Data base = make_data(rng, c.dtype, 3000, c.dim);
  const uint32_t n_lists = 24;
  udf_index* ix = build(m, c.metric, base, n_lists);
  ASSERT_NE(ix, nullptr);
  for (uint32_t k : {1u, 10u, 200u}) {
    for (int64_t nq : {int64_t(1), int64_t(300)}) {
      const Data q = make_data(rng, c.dtype, nq, c.dim);
      Result r;
      ASSERT_EQ(search(ix, q, k, n_lists, r), UDF_OK) << udf_last_error();
      expect_exact(base, q, r, k, c.max_order, c.ref, c.tol);
    }
  }
  udf_index_destroy(ix);
}
INSTANTIATE_TEST_SUITE_P(Metrics, Exact, ::testing::Range(0, static_cast<int>(exact_cases().size())),
                         [](const auto& i) {
                           const ExactCase c = exact_cases()[i.param];
                           std::string prefix = std::string(c.module).rfind("ir_", 0) == 0 ? std::string(c.module) + "_" : "";
                           return prefix + c.metric;
                         });

// Weighted L2 with a captured array, compiled from MLIR and from LLVM IR.
TEST_F(Fixture, WeightedL2FromMlirAndLlvmIr) {
  REQUIRE_GPU();
  const int64_t dim = 40;
  const Data base = make_data(rng, UDF_DTYPE_F32, 2000, dim);
  const Data q = make_data(rng, UDF_DTYPE_F32, 50, dim);
  Weights weights(rng, dim, 0, 4);
  std::vector<float>& w = weights.w;
  const RefFn ref = weights.l2_ref();
  udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  for (udf_module* m : {ir_mlir, ir_ll}) {
    SCOPED_TRACE(m == ir_mlir ? "mlir" : "llvm-ir");
    udf_index* ix = build(m, "weighted_l2", base, 16);
    ASSERT_NE(ix, nullptr);
    Result r;
    ASSERT_EQ(search(ix, q, 30, 16, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
    expect_exact(base, q, r, 30, false, ref, 1e-4);
    udf_index_destroy(ix);
  }
}

TEST_F(Fixture, WeightedL2CaptureHostAndDevice) {
  REQUIRE_GPU();
  const int64_t dim = 48;
  const Data base = make_data(rng, UDF_DTYPE_F32, 2000, dim);
  const Data q = make_data(rng, UDF_DTYPE_F32, 64, dim);
  std::vector<float> w(dim);
  std::vector<double> wd(dim);
  std::uniform_real_distribution<double> u(0, 4);
  for (int64_t i = 0; i < dim; ++i) wd[i] = w[i] = static_cast<float>(u(rng));
  udf_index* ix = build(udfs, "weighted_l2", base, 16);
  ASSERT_NE(ix, nullptr);
  auto ref = [&](const double* x, const double* y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += wd[i] * (x[i] - y[i]) * (x[i] - y[i]);
    return s;
  };
  udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  Result r;
  ASSERT_EQ(search(ix, q, 50, 16, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 50, false, ref, 1e-4);
  DevMem dw(w.data(), w.size() * 4);
  udf_tensor wdev = udf::tensor(dw.ptr(), UDF_DTYPE_F32, dim, 1, 0);
  ASSERT_EQ(search(ix, q, 50, 16, r, {{"weights", &wdev, 0, 0}}), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 50, false, ref, 1e-4);
  // CAPTURE ALIGNMENT (ivf_flat_v1.h): the scans read the weights 16 bytes
  // at a time; device arrays 4, 8 and 12 bytes past a 16-byte boundary (a
  // slice of a bigger array) are copied to aligned memory first, so they
  // give the same results as the aligned array, with no fault.  Then the
  // host array again: the copies took the buffer its last upload had left
  // there, so it is uploaded again (other values than the slices').
  {
    std::vector<float> w2(dim);
    std::vector<double> wd2(dim);
    for (int64_t i = 0; i < dim; ++i) wd2[i] = w2[i] = static_cast<float>(u(rng));
    auto ref2 = [&](const double* x, const double* y, int64_t n) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += wd2[i] * (x[i] - y[i]) * (x[i] - y[i]);
      return s;
    };
    DevMem aligned(w2.data(), w2.size() * 4);
    udf_tensor wa = udf::tensor(aligned.ptr(), UDF_DTYPE_F32, 1, dim, 0);
    Result ra;
    ASSERT_EQ(search(ix, q, 50, 16, ra, {{"weights", &wa, 0, 0}}), UDF_OK) << udf_last_error();
    expect_exact(base, q, ra, 50, false, ref2, 1e-4);
    for (int off = 1; off < 4; ++off) {
      SCOPED_TRACE("weights " + std::to_string(4 * off) + " bytes past 16");
      std::vector<float> padded(dim + 4, -1.0f);
      std::copy(w2.begin(), w2.end(), padded.begin() + off);
      DevMem dp(padded.data(), padded.size() * 4);
      udf_tensor ws = udf::tensor(static_cast<float*>(dp.ptr()) + off, UDF_DTYPE_F32, 1, dim, 0);
      ASSERT_NE(reinterpret_cast<std::uintptr_t>(ws.data) % 16, 0u);
      Result rs;
      ASSERT_EQ(search(ix, q, 50, 16, rs, {{"weights", &ws, 0, 0}}), UDF_OK) << udf_last_error();
      EXPECT_EQ(rs.ids, ra.ids);
      EXPECT_EQ(rs.dist, ra.dist);
    }
    ASSERT_EQ(search(ix, q, 50, 16, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
    expect_exact(base, q, r, 50, false, ref, 1e-4);
  }
  // A host array equal to the last one uploaded is not uploaded again: new
  // values in the same array, one weight changed, the old values back, a
  // single query (the direct schedule) and a batch, each against float64.
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("weights round " + std::to_string(round));
    if (round == 1) {
      for (int64_t i = 0; i < dim; ++i) wd[i] = w[i] = static_cast<float>(u(rng));
    } else if (round == 2) {
      wd[dim - 1] = w[dim - 1] = w[dim - 1] + 3.0f;
    } else if (round == 3) {
      wd[dim - 1] = w[dim - 1] = w[dim - 1] - 3.0f;
    }
    for (const Data& qq : {q.rows_of(5, 1), q}) {
      ASSERT_EQ(search(ix, qq, 50, 16, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
      expect_exact(base, qq, r, 50, false, ref, 1e-4);
      ASSERT_EQ(search(ix, qq, 50, 16, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
      expect_exact(base, qq, r, 50, false, ref, 1e-4);
    }
  }
  // Capture errors.
  EXPECT_EQ(search(ix, q, 10, 16, r), UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("weights:f32[]"), std::string::npos) << udf_last_error();
  std::vector<int32_t> wi(dim);
  udf_tensor wrong_type = udf::tensor(wi.data(), UDF_DTYPE_I32, 1, dim);
  EXPECT_EQ(search(ix, q, 10, 16, r, {{"weights", &wrong_type, 0, 0}}), UDF_ERROR_CAPTURE);
  udf_tensor short_len = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim - 1);
  EXPECT_EQ(search(ix, q, 10, 16, r, {{"weights", &short_len, 0, 0}}), UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("dim = 48"), std::string::npos) << udf_last_error();
  EXPECT_EQ(search(ix, q, 10, 16, r, {{"weights", &wt, 0, 0}, {"bogus", &wt, 0, 0}}), UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("bogus"), std::string::npos) << udf_last_error();
  EXPECT_EQ(search(ix, q, 10, 16, r, {{"weights", nullptr, 1.0f, 0}}), UDF_ERROR_CAPTURE);
  udf_index_destroy(ix);
}

TEST_F(Fixture, ScalarCaptureAndFinalizeMaxOrder) {
  REQUIRE_GPU();
  const int64_t dim = 32;
  const Data base = make_data(rng, UDF_DTYPE_F32, 2500, dim);
  const Data q = make_data(rng, UDF_DTYPE_F32, 100, dim);
  udf_index* ix = build(udfs, "scaled_ip", base, 20);
  ASSERT_NE(ix, nullptr);
  const float scale = 0.25f;
  auto ref = [&](const double* x, const double* y, int64_t n) { return ip(x, y, n) * scale; };
  Result r;
  ASSERT_EQ(search(ix, q, 100, 20, r, {{"scale", nullptr, scale, 0}}), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 100, true, ref, 1e-4);
  float s2 = scale;
  udf_tensor st = udf::tensor(&s2, UDF_DTYPE_F32, 1, 1);
  ASSERT_EQ(search(ix, q, 100, 20, r, {{"scale", &st, 0, 0}}), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 100, true, ref, 1e-4);
  udf_index_destroy(ix);
}

TEST_F(Fixture, LargeKAndPadding) {
  REQUIRE_GPU();
  const Data base = make_data(rng, UDF_DTYPE_F32, 1500, 20);
  const Data q = make_data(rng, UDF_DTYPE_F32, 40, 20);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 8);
  ASSERT_NE(ix, nullptr);
  Result r;
  ASSERT_EQ(search(ix, q, 1024, 8, r), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 1024, false, l2, 1e-4);
  // k > the index size: padded with id -1 and +inf.
  const Data small = make_data(rng, UDF_DTYPE_F32, 30, 20);
  udf_index* ix2 = build(builtin, "udf_builtin_l2", small, 2);
  ASSERT_EQ(search(ix2, q, 40, 2, r), UDF_OK) << udf_last_error();
  for (int64_t i = 0; i < q.rows; ++i) {
    EXPECT_GE(r.ids[i * 40 + 29], 0);
    EXPECT_EQ(r.ids[i * 40 + 30], -1);
    EXPECT_TRUE(std::isinf(r.dist[i * 40 + 39]));
  }
  udf_index_destroy(ix2);
  udf_index_destroy(ix);
}

TEST_F(Fixture, ParameterErrors) {
  REQUIRE_GPU();
  const Data base = make_data(rng, UDF_DTYPE_F32, 500, 16);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 8);
  ASSERT_NE(ix, nullptr);
  const Data q = make_data(rng, UDF_DTYPE_F32, 3, 16);
  Result r;
  EXPECT_EQ(search(ix, q, 0, 4, r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("k = 0"), std::string::npos);
  EXPECT_EQ(search(ix, q, 1025, 4, r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("1024"), std::string::npos);
  EXPECT_EQ(search(ix, q, 10, 0, r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(search(ix, q, 10, 9, r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("n_probes = 9"), std::string::npos);
  const Data q17 = make_data(rng, UDF_DTYPE_F32, 3, 17);
  EXPECT_EQ(search(ix, q17, 10, 4, r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("dimension 17"), std::string::npos);
  const Data qh = make_data(rng, UDF_DTYPE_F16, 3, 16);
  EXPECT_EQ(search(ix, qh, 10, 4, r), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(search(ix, q, 10, 4, r, {{"x", nullptr, 0, 0}}), UDF_ERROR_CAPTURE);
  // A host pointer claimed to be device memory is refused, not dereferenced.
  udf_tensor lie = q.tensor();
  lie.device = 0;
  udf_search_params p;
  udf_search_params_default(&p);
  p.n_probes = 4;
  udf_tensor od = udf::tensor(r.dist.data(), UDF_DTYPE_F32, 3, 10), oi = udf::tensor(r.ids.data(), UDF_DTYPE_I64, 3, 10);
  r.dist.resize(30);
  r.ids.resize(30);
  EXPECT_EQ(udf_index_search(ix, &lie, &p, &od, &oi), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("not CUDA device memory"), std::string::npos) << udf_last_error();
  // Build errors.
  udf_index_params bp;
  udf_index_params_default(&bp);
  udf_tensor t = base.tensor();
  udf_index* bad = nullptr;
  bp.n_lists = 0;
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &bp, &bad), UDF_ERROR_INVALID_ARGUMENT);
  bp.n_lists = 1000;
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &bp, &bad), UDF_ERROR_INVALID_ARGUMENT);
  bp.n_lists = 8;
  EXPECT_EQ(udf_index_build(builtin, "nope", &t, nullptr, &bp, &bad), UDF_ERROR_INVALID_ARGUMENT);
  const Data u8 = make_data(rng, UDF_DTYPE_U8, 100, 16);
  udf_tensor tu = u8.tensor();
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_l2", &tu, nullptr, &bp, &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  udf_index_destroy(ix);
}

// The versioned parameter structs as callers built against other headers
// pass them: one never filled (struct_size 0) is refused naming struct_size;
// a newer caller's larger struct works while the fields this library does
// not know are zero and is refused once one is set.
TEST_F(Fixture, VersionedParamsFromOlderAndNewerCallers) {
  REQUIRE_GPU();
  const Data base = make_data(rng, UDF_DTYPE_F32, 400, 12);
  const Data q = make_data(rng, UDF_DTYPE_F32, 4, 12);
  udf_tensor t = base.tensor(), qt = q.tensor();
  struct NewerIndexParams {
    udf_index_params p;
    uint64_t later_field;
  } bp;
  udf_index_params_init(&bp.p, sizeof bp);
  EXPECT_EQ(bp.p.struct_size, sizeof bp);
  EXPECT_EQ(bp.later_field, 0u);
  bp.p.n_lists = 4;
  udf_index* ix = nullptr;
  ASSERT_EQ(udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &bp.p, &ix), UDF_OK) << udf_last_error();
  bp.later_field = 7;
  udf_index* bad = reinterpret_cast<udf_index*>(0x1);
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &bp.p, &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(udf_last_error()).find("does not know"), std::string::npos) << udf_last_error();
  udf_index_params never_filled{};
  never_filled.n_lists = 4;
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &never_filled, &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("struct_size = 0"), std::string::npos) << udf_last_error();

  Result want, got;
  ASSERT_EQ(search(ix, q, 5, 4, want), UDF_OK) << udf_last_error();
  struct NewerSearchParams {
    udf_search_params p;
    uint32_t later_fields[6];
  } sp;
  udf_search_params_init(&sp.p, sizeof sp);
  sp.p.k = 5;
  sp.p.n_probes = 4;
  got.dist.assign(4 * 5, 0.0f);
  got.ids.assign(4 * 5, 0);
  udf_tensor od = udf::tensor(got.dist.data(), UDF_DTYPE_F32, 4, 5), oi = udf::tensor(got.ids.data(), UDF_DTYPE_I64, 4, 5);
  ASSERT_EQ(udf_index_search(ix, &qt, &sp.p, &od, &oi), UDF_OK) << udf_last_error();
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.dist, want.dist);
  sp.later_fields[5] = 1;
  EXPECT_EQ(udf_index_search(ix, &qt, &sp.p, &od, &oi), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("does not know"), std::string::npos) << udf_last_error();
  sp.later_fields[5] = 0;
  sp.p.struct_size = 0;
  EXPECT_EQ(udf_index_search(ix, &qt, &sp.p, &od, &oi), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("struct_size"), std::string::npos) << udf_last_error();
  udf_index_destroy(ix);
}

TEST_F(Fixture, SaveLoadAddAndMismatch) {
  REQUIRE_GPU();
  const Data a = make_data(rng, UDF_DTYPE_F32, 1500, 24), b = make_data(rng, UDF_DTYPE_F32, 700, 24);
  udf_index* ix = build(builtin, "udf_builtin_l2", a, 12);
  ASSERT_NE(ix, nullptr);
  std::vector<int64_t> ids(b.rows);
  std::iota(ids.begin(), ids.end(), a.rows);
  udf_tensor bt = b.tensor(), it = udf::tensor(ids.data(), UDF_DTYPE_I64, b.rows, 1);
  ASSERT_EQ(udf_index_add(ix, &bt, &it), UDF_OK) << udf_last_error();
  Data all = a;
  all.rows += b.rows;
  all.bytes.insert(all.bytes.end(), b.bytes.begin(), b.bytes.end());
  all.v.insert(all.v.end(), b.v.begin(), b.v.end());
  const Data q = make_data(rng, UDF_DTYPE_F32, 50, 24);
  Result r1, r2;
  ASSERT_EQ(search(ix, q, 20, 12, r1), UDF_OK) << udf_last_error();
  expect_exact(all, q, r1, 20, false, l2, 1e-4);
  const std::string path = ::testing::TempDir() + "rt_index.udfi";
  ASSERT_EQ(udf_index_save(ix, path.c_str()), UDF_OK) << udf_last_error();
  udf_index* ix2 = nullptr;
  ASSERT_EQ(udf_index_load(builtin, path.c_str(), &ix2), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(ix2, q, 20, 12, r2), UDF_OK) << udf_last_error();
  EXPECT_EQ(r1.ids, r2.ids);
  EXPECT_EQ(r1.dist, r2.dist);
  udf_index_info info;
  ASSERT_EQ(udf_index_info_get(ix2, &info), UDF_OK);
  EXPECT_EQ(info.size, all.rows);
  udf_index* ix3 = nullptr;
  EXPECT_EQ(udf_index_load(udfs, path.c_str(), &ix3), UDF_ERROR_MISMATCH);
  EXPECT_NE(std::string(udf_last_error()).find("udf_builtin_l2"), std::string::npos) << udf_last_error();
  udf_index_destroy(ix2);
  udf_index_destroy(ix);
}

// The lists of an index file (udf_index_save's format, docs/runtime.md):
// the header fields the test needs and, per list, its ids and rows.
struct FileLists {
  uint32_t dim = 0, n_lists = 0, coarse = 0;
  std::vector<float> coarse_weights;
  int64_t size = 0, next_id = 0;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<uint8_t>> rows;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

FileLists parse_lists(const std::vector<uint8_t>& b, size_t esize) {
  size_t at = 8 + 4 + 4 + 4;  // magic, major, minor, element type
  auto get = [&](auto& v) {
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
  };
  FileLists f;
  uint32_t len = 0;
  double balance = 0;
  get(f.dim);
  get(f.n_lists);
  get(f.coarse);
  get(f.size);
  get(f.next_id);
  get(balance);
  get(len);
  at += len;  // symbol
  get(len);
  at += len;  // cache key
  if (f.coarse & 0x200) {  // coarse weights
    f.coarse_weights.resize(f.dim);
    std::memcpy(f.coarse_weights.data(), b.data() + at, size_t(f.dim) * 4);
    at += size_t(f.dim) * 4;
  }
  at += size_t(f.n_lists) * f.dim * 4;  // centroids
  std::vector<uint64_t> sizes(f.n_lists);
  for (auto& s : sizes) get(s);
  f.ids.resize(f.n_lists);
  f.rows.resize(f.n_lists);
  for (uint32_t l = 0; l < f.n_lists; ++l) {
    f.ids[l].resize(sizes[l]);
    std::memcpy(f.ids[l].data(), b.data() + at, sizes[l] * 8);
    at += sizes[l] * 8;
    f.rows[l].assign(b.begin() + at, b.begin() + at + sizes[l] * f.dim * esize);
    at += sizes[l] * f.dim * esize;
  }
  EXPECT_EQ(at + 32, b.size());  // then the SHA-256
  return f;
}

// An index file records the artifact's cache key as provenance: a file that
// names another artifact of its metric (one recompiled since: another udfc or
// toolkit, other archs) loads and searches as the index saved; a file whose
// coarse metric is not its metric's does not load.
TEST_F(Fixture, AnIndexFileLoadsWithAnotherArtifactOfItsMetric) {
  REQUIRE_GPU();
  const Data a = make_data(rng, UDF_DTYPE_F32, 2000, 24), q = make_data(rng, UDF_DTYPE_F32, 40, 24);
  udf_index* ix = build(builtin, "udf_builtin_l2", a, 16);
  ASSERT_NE(ix, nullptr);
  Result want, got;
  ASSERT_EQ(search(ix, q, 10, 4, want), UDF_OK) << udf_last_error();
  const std::string path = ::testing::TempDir() + "rt_other_artifact.udfi";
  ASSERT_EQ(udf_index_save(ix, path.c_str()), UDF_OK) << udf_last_error();
  udf_index_destroy(ix);

  // The header up to the key: magic, major, minor, elem, dim, n_lists, coarse,
  // size, next_id, balance, then the symbol and the key (u32 length + bytes).
  std::vector<uint8_t> b = read_bytes(path);
  const size_t coarse_at = 8 + 4 * 5;
  size_t at = coarse_at + 4 + 8 + 8 + 8;
  auto u32_at = [&](size_t i) {
    uint32_t v = 0;
    std::memcpy(&v, b.data() + i, 4);
    return v;
  };
  at += 4 + u32_at(at);
  const uint32_t key_len = u32_at(at);
  ASSERT_EQ(key_len, 64u);
  const std::string key(reinterpret_cast<const char*>(b.data() + at + 4), key_len);
  size_t mi = 0;
  ASSERT_EQ(udf_module_find_metric(builtin, "udf_builtin_l2", &mi), UDF_OK);
  udf_metric_info info;
  ASSERT_EQ(udf_module_metric_info(builtin, mi, &info), UDF_OK);
  EXPECT_EQ(key, info.cache_key);
  auto write_signed = [&](std::vector<uint8_t> v, const std::string& name) {
    v.resize(v.size() - SHA256_DIGEST_LENGTH);
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256(v.data(), v.size(), h);
    v.insert(v.end(), h, h + sizeof h);
    const std::string p = ::testing::TempDir() + name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), v.size());
    return p;
  };
  std::vector<uint8_t> other = b;
  for (uint32_t i = 0; i < key_len; ++i) other[at + 4 + i] = '0' + (i % 10);
  ASSERT_NE(std::string(reinterpret_cast<const char*>(other.data() + at + 4), key_len), key);
  udf_index* ix2 = nullptr;
  ASSERT_EQ(udf_index_load(builtin, write_signed(other, "rt_other_key.udfi").c_str(), &ix2), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(ix2, q, 10, 4, got), UDF_OK) << udf_last_error();
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.dist, want.dist);
  udf_index_destroy(ix2);

  std::vector<uint8_t> ip = other;
  ip[coarse_at] = 1;  // inner product
  udf_index* ix3 = nullptr;
  EXPECT_EQ(udf_index_load(builtin, write_signed(ip, "rt_other_coarse.udfi").c_str(), &ix3), UDF_ERROR_MISMATCH);
  EXPECT_NE(std::string(udf_last_error()).find("coarse metric differs"), std::string::npos) << udf_last_error();
  EXPECT_EQ(ix3, nullptr);
}

// The build's one-pass nearest lists (the `nearest` kernel) give what the
// coarse probe's keys and selection give (udf_testing_paths, kPathKeysAssign),
// bit for bit, where the coarse metric is inner product or cosine (an L2
// assignment compares expanded distances, as k-means does, so there the
// keys path is the one-pass kernel too and the cases check host rows
// against device rows); and past one 64-centroid tile the wide kernel gives
// what the 64-centroid one gives (kPathNarrowNearest): the same saved file,
// centroids, lists and ids, for every element type, dims that are and are
// not whole 16-byte chunks, list counts under, at and past a 64-centroid
// tile and a 128-centroid one, the balanced assignment (eight candidates)
// and the plain one (one), L2, inner product and cosine, many equal keys
// (int8 and u8 rows), host rows with a row stride, and device rows (their
// k-means sample gathered on the device).
TEST_F(Fixture, OnePassNearestListsBuildTheSameIndexAsTheKeys) {
  REQUIRE_GPU();
  struct Unset {
    ~Unset() { udf_testing_paths(0); }
  } unset;
  struct C {
    const char* module;
    const char* metric;
    udf_dtype dtype;
    int64_t dim, rows;
    uint32_t n_lists;
    double balance;
  };
  for (const C& c : {C{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, 128, 20000, 1000, 2.0},
                     C{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, 96, 30000, 260, 0.0},
                     C{"builtin", "udf_builtin_inner_product", UDF_DTYPE_F32, 40, 6000, 128, 1.3},
                     C{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, 5, 3000, 7, 2.0},
                     C{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, 36, 4000, 64, 1.1},
                     C{"builtin", "udf_builtin_inner_product", UDF_DTYPE_F32, 64, 5000, 300, 0.0},
                     C{"builtin", "udf_builtin_cosine", UDF_DTYPE_F32, 9, 2000, 40, 2.0},
                     C{"udfs", "f16_l2", UDF_DTYPE_F16, 13, 3000, 70, 2.0},
                     C{"udfs", "int8_l2", UDF_DTYPE_I8, 7, 3000, 129, 1.5},
                     C{"udfs", "u8_l1", UDF_DTYPE_U8, 21, 3000, 16, 0.0}}) {
    SCOPED_TRACE(std::string(c.metric) + " dim " + std::to_string(c.dim) + ", " + std::to_string(c.n_lists) + " lists");
    std::mt19937_64 rng(fresh_seed());
    udf_module* m = std::string(c.module) == "udfs" ? udfs : builtin;
    const size_t es = udf_dtype_size(c.dtype), row_bytes = size_t(c.dim) * es;
    const Data d = make_data(rng, c.dtype, c.rows, c.dim, 12);
    const int64_t stride = c.dim + 3;  // the host rows: a row stride past dim
    std::vector<uint8_t> host(size_t(c.rows) * stride * es, 0xEE);
    for (int64_t i = 0; i < c.rows; ++i) std::memcpy(&host[i * stride * es], &d.bytes[i * row_bytes], row_bytes);
    DevMem dev(d.bytes.data(), d.bytes.size());
    udf_tensor th = udf::tensor(host.data(), c.dtype, c.rows, c.dim), td = udf::tensor(dev.ptr(), c.dtype, c.rows, c.dim);
    th.row_stride = stride;
    td.device = 0;
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = c.n_lists;
    p.kmeans_iters = 4;
    p.balance = c.balance;
    p.seed = rng();
    const std::string dir = ::testing::TempDir();
    std::vector<std::vector<uint8_t>> files;
    // The keys (host rows), one pass (host rows), one pass (device rows),
    // one pass by the 64-centroid kernel (host rows).
    for (int path = 0; path < 4; ++path) {
      ASSERT_EQ(udf_testing_paths(path == 0 ? kPathKeysAssign : path == 3 ? kPathNarrowNearest : 0u), UDF_OK)
          << udf_last_error();
      udf_index* ix = nullptr;
      ASSERT_EQ(udf_index_build(m, c.metric, path == 2 ? &td : &th, nullptr, &p, &ix), UDF_OK) << udf_last_error();
      const std::string file = dir + "nearest_" + std::to_string(path) + ".udfi";
      ASSERT_EQ(udf_index_save(ix, file.c_str()), UDF_OK) << udf_last_error();
      udf_index_destroy(ix);
      files.push_back(read_bytes(file));
    }
    EXPECT_TRUE(files[0] == files[1]) << "one pass, host rows";
    EXPECT_TRUE(files[0] == files[2]) << "one pass, device rows";
    EXPECT_TRUE(files[1] == files[3]) << "the 64-centroid kernel";
  }
}

// The device-side lists (udf_index_build / add build them on the GPU, save
// reads them back): every row in exactly one list with its id, whatever the
// row's bytes (not a multiple of 16), the input's row stride, host or device
// input, several chunks of rows, normalized storage (cosine), and rows
// staged again for the placement (udf_testing_paths, kPathRestageRows).  Load + save and
// with_metric + save give the same file bytes.
TEST_F(Fixture, DeviceListsHoldEveryRowOnceThroughBuildAddSaveLoad) {
  REQUIRE_GPU();
  struct C {
    const char* module;
    const char* metric;
    udf_dtype dtype;
    int64_t dim, rows_a;
    bool normalized, restage;
  };
  for (const C& c : {C{"udfs", "f16_l2", UDF_DTYPE_F16, 13, 700, false, false},
                     C{"udfs", "int8_l2", UDF_DTYPE_I8, 7, 700, false, true},
                     C{"udfs", "u8_l1", UDF_DTYPE_U8, 21, 700, false, false},
                     C{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, 5, 140000, false, false},
                     C{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, 5, 140000, false, true},
                     C{"builtin", "udf_builtin_cosine", UDF_DTYPE_F32, 9, 700, true, false},
                     C{"builtin", "udf_builtin_cosine", UDF_DTYPE_F32, 9, 700, true, true}}) {
    SCOPED_TRACE(std::string(c.metric) + " rows " + std::to_string(c.rows_a) + (c.restage ? " restaged" : ""));
    ASSERT_EQ(udf_testing_paths(c.restage ? kPathRestageRows : 0u), UDF_OK) << udf_last_error();
    std::mt19937_64 rng(fresh_seed());
    udf_module* m = std::string(c.module) == "udfs" ? udfs : builtin;
    const size_t es = udf_dtype_size(c.dtype), row_bytes = size_t(c.dim) * es;
    const Data a = make_data(rng, c.dtype, c.rows_a, c.dim), b = make_data(rng, c.dtype, 300, c.dim);
    // a: a host tensor with a row stride of dim + 3 and ids 1000 + 7 i; b: a
    // device tensor with a row stride of dim + 1 and no ids.
    const int64_t sa = c.dim + 3, sb = c.dim + 1;
    std::vector<uint8_t> ha(size_t(a.rows) * sa * es, 0xEE), hb(size_t(b.rows) * sb * es, 0xEE);
    for (int64_t i = 0; i < a.rows; ++i) std::memcpy(&ha[i * sa * es], &a.bytes[i * row_bytes], row_bytes);
    for (int64_t i = 0; i < b.rows; ++i) std::memcpy(&hb[i * sb * es], &b.bytes[i * row_bytes], row_bytes);
    DevMem db(hb.data(), hb.size());
    std::vector<int64_t> ids_a(a.rows);
    for (int64_t i = 0; i < a.rows; ++i) ids_a[i] = 1000 + 7 * i;
    udf_tensor ta = udf::tensor(ha.data(), c.dtype, a.rows, c.dim), tb = udf::tensor(db.ptr(), c.dtype, b.rows, c.dim);
    ta.row_stride = sa;
    tb.row_stride = sb;
    tb.device = 0;
    udf_tensor tia = udf::tensor(ids_a.data(), UDF_DTYPE_I64, a.rows, 1);
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = 6;
    p.kmeans_iters = 3;
    udf_index* ix = nullptr;
    ASSERT_EQ(udf_index_build(m, c.metric, &ta, &tia, &p, &ix), UDF_OK) << udf_last_error();
    ASSERT_EQ(udf_index_add(ix, &tb, nullptr), UDF_OK) << udf_last_error();
    const std::string dir = ::testing::TempDir();
    ASSERT_EQ(udf_index_save(ix, (dir + "lists_a.udfi").c_str()), UDF_OK) << udf_last_error();
    const std::vector<uint8_t> file = read_bytes(dir + "lists_a.udfi");
    const FileLists f = parse_lists(file, es);
    EXPECT_EQ(f.size, a.rows + b.rows);
    const int64_t b0 = 1000 + 7 * (a.rows - 1) + 1;  // b's ids continue after a's largest
    EXPECT_EQ(f.next_id, b0 + b.rows);
    std::vector<int> seen(a.rows + b.rows, 0);
    size_t total = 0, bad_rows = 0, bad_ids = 0;
    for (uint32_t l = 0; l < f.n_lists; ++l) {
      total += f.ids[l].size();
      for (size_t i = 0; i < f.ids[l].size(); ++i) {
        const int64_t id = f.ids[l][i];
        int64_t at = -1;
        if (id >= 1000 && id < 1000 + 7 * a.rows && (id - 1000) % 7 == 0) at = (id - 1000) / 7;
        if (id >= b0 && id < b0 + b.rows) at = a.rows + (id - b0);
        if (at < 0) {
          ++bad_ids;
          continue;
        }
        ++seen[at];
        const uint8_t* want = at < a.rows ? &a.bytes[at * row_bytes] : &b.bytes[(at - a.rows) * row_bytes];
        const uint8_t* got = &f.rows[l][i * row_bytes];
        if (!c.normalized) {
          bad_rows += std::memcmp(want, got, row_bytes) != 0;
          continue;
        }
        float w[64], g[64];  // stored normalized
        std::memcpy(w, want, row_bytes);
        std::memcpy(g, got, row_bytes);
        double norm = 0;
        for (int64_t d = 0; d < c.dim; ++d) norm += double(w[d]) * w[d];
        bool ok = true;
        for (int64_t d = 0; d < c.dim; ++d) ok = ok && std::abs(g[d] - w[d] / std::sqrt(norm)) <= 1e-6;
        bad_rows += !ok;
      }
    }
    EXPECT_EQ(total, size_t(a.rows + b.rows));
    EXPECT_EQ(bad_ids, 0u);
    EXPECT_EQ(bad_rows, 0u);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), a.rows + b.rows);
    // Load + save and with_metric + save write the same bytes.
    udf_index *ix2 = nullptr, *ix3 = nullptr;
    ASSERT_EQ(udf_index_load(m, (dir + "lists_a.udfi").c_str(), &ix2), UDF_OK) << udf_last_error();
    ASSERT_EQ(udf_index_save(ix2, (dir + "lists_b.udfi").c_str()), UDF_OK) << udf_last_error();
    EXPECT_TRUE(read_bytes(dir + "lists_b.udfi") == file);
    ASSERT_EQ(udf_index_with_metric(ix, m, c.metric, &ix3), UDF_OK) << udf_last_error();
    ASSERT_EQ(udf_index_save(ix3, (dir + "lists_c.udfi").c_str()), UDF_OK) << udf_last_error();
    EXPECT_TRUE(read_bytes(dir + "lists_c.udfi") == file);
    // A search of the loaded index finds a's row 3 itself (distance 0 under L2 metrics).
    if (!c.normalized && c.dtype != UDF_DTYPE_U8) {
      Data q = a;
      q.rows = 1;
      q.bytes.assign(a.bytes.begin() + 3 * row_bytes, a.bytes.begin() + 4 * row_bytes);
      q.v.assign(a.v.begin() + 3 * c.dim, a.v.begin() + 4 * c.dim);
      Result r;
      ASSERT_EQ(search(ix2, q, 1, 6, r), UDF_OK) << udf_last_error();
      EXPECT_EQ(r.dist[0], 0.0f);
    }
    udf_index_destroy(ix3);
    udf_index_destroy(ix2);
    udf_index_destroy(ix);
  }
  udf_testing_paths(0);
}

// udf_index_with_metric: lists built with the built-in l2, scanned with a UDF
// of the same element type and coarse metric; other element types and coarse
// metrics are refused.
// The build is deterministic: k-means adds each list's rows up in row order
// (not with atomics, whose order varies), so two builds of the same data give
// the same centroids and lists, and byte-identical files.  Random floats (sums
// whose rounding depends on the order), IP and L2 coarse metrics.
TEST_F(Fixture, TwoBuildsOfTheSameDataGiveTheSameFile) {
  REQUIRE_GPU();
  const Data a = make_data(rng, UDF_DTYPE_F32, 20000, 40);
  const std::string dir = ::testing::TempDir();
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = 64;
  p.seed = rng();  // the same seed for every build
  udf_tensor t = a.tensor();
  for (const char* metric : {"udf_builtin_l2", "udf_builtin_inner_product"}) {
    SCOPED_TRACE(metric);
    std::vector<uint8_t> first;
    for (int run = 0; run < 3; ++run) {
      udf_index* ix = nullptr;
      ASSERT_EQ(udf_index_build(builtin, metric, &t, nullptr, &p, &ix), UDF_OK) << udf_last_error();
      const std::string path = dir + "twice_" + std::to_string(run) + ".udfi";
      ASSERT_EQ(udf_index_save(ix, path.c_str()), UDF_OK) << udf_last_error();
      udf_index_destroy(ix);
      const std::vector<uint8_t> bytes = read_bytes(path);
      ASSERT_FALSE(bytes.empty());
      if (run == 0) first = bytes;
      else EXPECT_TRUE(bytes == first) << "build " << run << " wrote another file than build 0";
    }
  }
}

TEST_F(Fixture, WithMetricScansBuiltListsWithAUdf) {
  REQUIRE_GPU();
  const int64_t dim = 32;
  const Data base = make_data(rng, UDF_DTYPE_F32, 1800, dim), q = make_data(rng, UDF_DTYPE_F32, 40, dim);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 12);
  ASSERT_NE(ix, nullptr);
  udf_index* wx = nullptr;
  ASSERT_EQ(udf_index_with_metric(ix, udfs, "weighted_l2", &wx), UDF_OK) << udf_last_error();
  Weights weights(rng, dim, 0, 3);
  std::vector<float>& w = weights.w;
  const RefFn ref = weights.l2_ref();
  udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  Result r;
  ASSERT_EQ(search(wx, q, 25, 12, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 25, false, ref, 1e-4);
  udf_index_info info;
  ASSERT_EQ(udf_index_info_get(wx, &info), UDF_OK);
  EXPECT_EQ(std::string(info.metric), "weighted_l2");
  EXPECT_EQ(info.size, base.rows);
  // The original index is untouched and still searches with l2.
  ASSERT_EQ(search(ix, q, 25, 12, r), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 25, false, l2, 1e-4);
  udf_index* bad = nullptr;
  EXPECT_EQ(udf_index_with_metric(ix, builtin, "udf_builtin_inner_product", &bad), UDF_ERROR_MISMATCH);
  EXPECT_NE(std::string(udf_last_error()).find("coarse metric"), std::string::npos) << udf_last_error();
  EXPECT_EQ(udf_index_with_metric(ix, udfs, "f16_l2", &bad), UDF_ERROR_MISMATCH);
  EXPECT_NE(std::string(udf_last_error()).find("f16"), std::string::npos) << udf_last_error();
  EXPECT_EQ(udf_index_with_metric(ix, udfs, "nope", &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  udf_index_destroy(wx);
  udf_index_destroy(ix);
}

// udf_index_params.coarse_weights: an index of rows x built with weights w
// holds the lists of an index of the rows x * sqrt(w) built without them
// (the same centroids, and ids in every list, bit for bit; a k-means sample
// and an assignment of rows scaled on the GPU are the rows scaled on the
// host), yet stores x as given.  Searched with the weighted L2 of w, its
// queries probe the lists their scaled copies probe there, so it finds what
// the built-in l2 finds over the scaled rows, and recalls more than the
// index clustered by the plain L2 at the same n_probes.  The weights go
// through udf_index_add, save / load (a 1.1 file with the weights),
// udf_index_with_metric and udf_index_build_chunked; bad ones are refused,
// naming the field.
TEST_F(Fixture, CoarseWeightsClusterInTheWeightedSpace) {
  REQUIRE_GPU();
  const int64_t dim = 24, n = 6000, n_add = 1500;
  const uint32_t n_lists = 40, probes = 6, k = 10;
  Weights weights(rng, dim, 0, 4);
  weights.w[3] = 0;  // a dimension the metric ignores
  weights.wd[3] = 0;
  weights.w[5] = 25;  // and one it stresses
  weights.wd[5] = 25;
  const std::vector<float>& w = weights.w;
  const Data base = make_data(rng, UDF_DTYPE_F32, n + n_add, dim);
  const Data first = base.rows_of(0, n), more = base.rows_of(n, n_add);
  const Data q = make_data(rng, UDF_DTYPE_F32, 200, dim);
  auto scaled = [&](const Data& d) {
    Data s = d;
    for (int64_t i = 0; i < d.rows * dim; ++i) {
      float x;
      std::memcpy(&x, &d.bytes[i * 4], 4);
      x *= std::sqrt(w[i % dim]);
      std::memcpy(&s.bytes[i * 4], &x, 4);
      s.v[i] = x;
    }
    return s;
  };
  const Data sfirst = scaled(first), smore = scaled(more), sq = scaled(q);
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = n_lists;
  p.kmeans_iters = 10;
  p.seed = rng();
  auto make = [&](udf_module* m, const char* metric, const Data& d, const float* cw) {
    udf_index_params pw = p;
    pw.coarse_weights = cw;
    udf_tensor t = d.tensor();
    udf_index* ix = nullptr;
    EXPECT_EQ(udf_index_build(m, metric, &t, nullptr, &pw, &ix), UDF_OK) << udf_last_error();
    return ix;
  };
  udf_index* wx = make(udfs, "weighted_l2", first, w.data());
  udf_index* sx = make(builtin, "udf_builtin_l2", sfirst, nullptr);
  udf_index* px = make(udfs, "weighted_l2", first, nullptr);
  ASSERT_TRUE(wx && sx && px);
  udf_tensor ta = more.tensor(), tsa = smore.tensor();
  ASSERT_EQ(udf_index_add(wx, &ta, nullptr), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_index_add(sx, &tsa, nullptr), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_index_add(px, &ta, nullptr), UDF_OK) << udf_last_error();
  auto centroids_of = [&](const udf_index* ix) {
    std::vector<float> c(size_t(n_lists) * dim);
    EXPECT_EQ(udf_index_centroids(ix, c.data(), c.size()), UDF_OK) << udf_last_error();
    return c;
  };
  EXPECT_TRUE(centroids_of(wx) == centroids_of(sx)) << "the weighted index's centroids are not the scaled rows' centroids";
  size_t count = 99;
  ASSERT_EQ(udf_index_coarse_weights(sx, nullptr, 0, &count), UDF_OK) << udf_last_error();
  EXPECT_EQ(count, 0u) << "an index without coarse weights";
  ASSERT_EQ(udf_index_coarse_weights(wx, nullptr, 0, &count), UDF_OK) << udf_last_error();
  ASSERT_EQ(count, size_t(dim));
  std::vector<float> got(dim, -1.0f);
  EXPECT_EQ(udf_index_coarse_weights(wx, got.data(), dim - 1, &count), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("coarse weights"), std::string::npos) << udf_last_error();
  ASSERT_EQ(udf_index_coarse_weights(wx, got.data(), got.size(), &count), UDF_OK) << udf_last_error();
  EXPECT_TRUE(got == w);
  EXPECT_FALSE(centroids_of(px) == centroids_of(wx)) << "the weights changed nothing";

  // The lists: the scaled index's ids, holding the rows as given.
  const std::string dir = ::testing::TempDir();
  const std::string wpath = dir + "coarse_w.udfi", spath = dir + "coarse_s.udfi";
  ASSERT_EQ(udf_index_save(wx, wpath.c_str()), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_index_save(sx, spath.c_str()), UDF_OK) << udf_last_error();
  const std::vector<uint8_t> wfile = read_bytes(wpath);
  uint32_t minor = 0;
  std::memcpy(&minor, wfile.data() + 12, 4);
  EXPECT_EQ(minor, 1u) << "a file with coarse weights is version 1.1";
  const FileLists fw = parse_lists(wfile, 4), fs = parse_lists(read_bytes(spath), 4);
  EXPECT_EQ(fw.coarse, 0x200u | 0u);
  EXPECT_TRUE(fw.coarse_weights == w);
  EXPECT_EQ(fs.coarse, uint32_t(0u));
  EXPECT_TRUE(fw.ids == fs.ids) << "the weighted index's lists are not the scaled rows' lists";
  int moved = 0;
  for (uint32_t l = 0; l < fw.n_lists; ++l)
    for (size_t i = 0; i < fw.ids[l].size(); ++i)
      moved += std::memcmp(fw.rows[l].data() + i * dim * 4, base.bytes.data() + fw.ids[l][i] * dim * 4, dim * 4) != 0;
  EXPECT_EQ(moved, 0) << "rows not stored as given";

  // The search probes the scaled queries' lists.
  udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  const std::vector<udf_capture_binding> caps = {{"weights", &wt, 0, 0}};
  Result rw, rs, rp;
  ASSERT_EQ(search(wx, q, k, probes, rw, caps), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(sx, sq, k, probes, rs), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(px, q, k, probes, rp, caps), UDF_OK) << udf_last_error();
  int same = 0;
  for (int64_t i = 0; i < q.rows; ++i) {
    std::vector<int64_t> a(rw.ids.begin() + i * k, rw.ids.begin() + (i + 1) * k), b(rs.ids.begin() + i * k, rs.ids.begin() + (i + 1) * k);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    same += a == b;
    for (uint32_t j = 0; j < k; ++j) {  // each distance is that id's weighted distance
      const int64_t id = rw.ids[i * k + j];
      ASSERT_TRUE(id >= 0 && id < base.rows) << "query " << i << " rank " << j << ": id " << id;
      const double want = weights.l2(&base.v[id * dim], &q.v[i * dim], dim);
      EXPECT_NEAR(rw.dist[i * k + j], want, 1e-4 * (1 + want)) << "query " << i << " rank " << j;
    }
  }
  // One query at a time (a tiny batch's direct schedule, its queries scaled
  // like a large batch's) gives the large batch's results.
  for (int64_t i = 0; i < 12; ++i) {
    Result r1;
    ASSERT_EQ(search(wx, q.rows_of(i, 1), k, probes, r1, caps), UDF_OK) << udf_last_error();
    EXPECT_TRUE(std::equal(r1.ids.begin(), r1.ids.end(), rw.ids.begin() + i * k)) << "query " << i << " alone";
    EXPECT_TRUE(std::equal(r1.dist.begin(), r1.dist.end(), rw.dist.begin() + i * k)) << "query " << i << " alone";
  }
  // (Only ties to within f32 rounding, where w (x - y)^2 and (sx - sy)^2 round apart, may differ.)
  EXPECT_GE(same, q.rows - 2) << "queries whose results are those of the scaled index";
  std::vector<std::vector<int64_t>> truth(q.rows);
  for (int64_t i = 0; i < q.rows; ++i) {
    std::vector<std::pair<double, int64_t>> all(base.rows);
    for (int64_t r = 0; r < base.rows; ++r) all[r] = {weights.l2(&base.v[r * dim], &q.v[i * dim], dim), r};
    std::partial_sort(all.begin(), all.begin() + k, all.end());
    for (uint32_t j = 0; j < k; ++j) truth[i].push_back(all[j].second);
  }
  auto recall = [&](const Result& r) {
    int64_t hit = 0;
    for (int64_t i = 0; i < q.rows; ++i)
      for (uint32_t j = 0; j < k; ++j) hit += std::count(truth[i].begin(), truth[i].end(), r.ids[i * k + j]);
    return double(hit) / double(q.rows * k);
  };
  EXPECT_GT(recall(rw), recall(rp)) << "weighted coarse " << recall(rw) << ", plain coarse " << recall(rp);

  // Save / load, with_metric and the chunked build keep the weights.
  udf_index* lx = nullptr;
  ASSERT_EQ(udf_index_load(udfs, wpath.c_str(), &lx), UDF_OK) << udf_last_error();
  Result rl;
  ASSERT_EQ(search(lx, q, k, probes, rl, caps), UDF_OK) << udf_last_error();
  EXPECT_TRUE(rl.ids == rw.ids && rl.dist == rw.dist) << "the loaded index searches otherwise";
  std::fill(got.begin(), got.end(), -1.0f);
  ASSERT_EQ(udf_index_coarse_weights(lx, got.data(), got.size(), &count), UDF_OK) << udf_last_error();
  EXPECT_TRUE(count == size_t(dim) && got == w) << "the loaded index's weights";
  udf_index* bx = nullptr;
  ASSERT_EQ(udf_index_with_metric(wx, builtin, "udf_builtin_l2", &bx), UDF_OK) << udf_last_error();
  const std::string bpath = dir + "coarse_b.udfi";
  ASSERT_EQ(udf_index_save(bx, bpath.c_str()), UDF_OK) << udf_last_error();
  EXPECT_TRUE(parse_lists(read_bytes(bpath), 4).coarse_weights == w);
  struct Chunks {
    const Data* parts[2];
  } chunks{{&first, &more}};
  udf_chunk_fn fn = [](void* user, size_t c, udf_tensor* data, udf_tensor* ids) -> int {
    *data = static_cast<Chunks*>(user)->parts[c]->tensor();
    ids->data = nullptr;
    return 0;
  };
  udf_index_params pw = p;
  pw.coarse_weights = w.data();
  udf_index* cx = nullptr;
  ASSERT_EQ(udf_index_build_chunked(&udfs, 1, "weighted_l2", 2, fn, &chunks, &pw, &cx), UDF_OK) << udf_last_error();
  const std::string cpath = dir + "coarse_c.udfi";
  ASSERT_EQ(udf_index_save(cx, cpath.c_str()), UDF_OK) << udf_last_error();
  EXPECT_TRUE(read_bytes(cpath) == wfile) << "the chunked build wrote another file than build + add";
  for (udf_index* x : {lx, bx, cx, wx, sx, px}) udf_index_destroy(x);

  // Bad weights, named.
  udf_tensor tf = first.tensor();
  udf_index* bad = nullptr;
  std::vector<float> wb = w;
  wb[7] = -1;
  pw.coarse_weights = wb.data();
  EXPECT_EQ(udf_index_build(udfs, "weighted_l2", &tf, nullptr, &pw, &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("coarse_weights[7]"), std::string::npos) << udf_last_error();
  wb[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(udf_index_build(udfs, "weighted_l2", &tf, nullptr, &pw, &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("coarse_weights[7]"), std::string::npos) << udf_last_error();
  std::fill(wb.begin(), wb.end(), 0.0f);
  EXPECT_EQ(udf_index_build(udfs, "weighted_l2", &tf, nullptr, &pw, &bad), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("all 0"), std::string::npos) << udf_last_error();
  pw.coarse_weights = w.data();
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_cosine", &tf, nullptr, &pw, &bad), UDF_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(udf_last_error()).find("cosine"), std::string::npos) << udf_last_error();
  EXPECT_EQ(bad, nullptr);
}

namespace {

// The built-in metrics the recall tests build with, and their float64 references.
struct BuiltinRef {
  const char* metric;
  bool max_order;
  RefFn ref;
};
std::vector<BuiltinRef> builtin_refs() {
  auto cosine = [](const double* x, const double* y, int64_t n) {
    return 1.0 - ip(x, y, n) / std::sqrt(ip(x, x, n) * ip(y, y, n));
  };
  return {BuiltinRef{"udf_builtin_l2", false, l2}, BuiltinRef{"udf_builtin_inner_product", true, ip},
          BuiltinRef{"udf_builtin_cosine", false, cosine}};
}

// Each query's k nearest base rows under c's reference (float64, by brute force).
std::vector<std::vector<int64_t>> exact_ids(const Data& base, const Data& q, uint32_t k, const BuiltinRef& c) {
  const int64_t dim = base.dim;
  std::vector<std::vector<int64_t>> truth(q.rows);
  for (int64_t qi = 0; qi < q.rows; ++qi) {
    std::vector<std::pair<double, int64_t>> all(base.rows);
    for (int64_t i = 0; i < base.rows; ++i) all[i] = {c.ref(&base.v[i * dim], &q.v[qi * dim], dim), i};
    std::partial_sort(all.begin(), all.begin() + k, all.end(), [&](auto& x, auto& y) {
      return c.max_order ? x.first > y.first : x.first < y.first;
    });
    for (uint32_t j = 0; j < k; ++j) truth[qi].push_back(all[j].second);
  }
  return truth;
}

// recall@k of a search's ids against exact_ids.
double recall_at(const Result& r, const std::vector<std::vector<int64_t>>& truth, uint32_t k) {
  size_t hit = 0;
  for (size_t qi = 0; qi < truth.size(); ++qi)
    for (uint32_t j = 0; j < k; ++j)
      for (uint32_t i = 0; i < k; ++i) hit += r.ids[qi * k + i] == truth[qi][j];
  return double(hit) / double(truth.size() * k);
}

}  // namespace

// n_probes well below n_lists on clustered data: the coarse order matters.
TEST_F(Fixture, RecallWithFewProbes) {
  REQUIRE_GPU();
  for (const BuiltinRef& c : builtin_refs()) {
    SCOPED_TRACE(c.metric);
    std::mt19937_64 rng(fresh_seed());
    const int64_t dim = 32, clusters = 200;
    std::vector<double> centers(clusters * dim);
    std::normal_distribution<double> nd(0, 1);
    for (auto& x : centers) x = nd(rng);
    const Data base = make_data(rng, UDF_DTYPE_F32, 20000, dim, clusters, &centers);
    const Data q = make_data(rng, UDF_DTYPE_F32, 200, dim, clusters, &centers);
    const uint32_t n_lists = 128, probes = 8, k = 10;
    udf_index* ix = build(builtin, c.metric, base, n_lists, 2.0, 15);
    ASSERT_NE(ix, nullptr);
    std::vector<uint32_t> sizes(n_lists);
    ASSERT_EQ(udf_index_list_sizes(ix, sizes.data(), n_lists), UDF_OK);
    const uint32_t mx = *std::max_element(sizes.begin(), sizes.end());
    EXPECT_LE(mx, static_cast<uint32_t>(std::ceil(2.0 * 20000 / n_lists)));
    Result r;
    ASSERT_EQ(search(ix, q, k, probes, r), UDF_OK) << udf_last_error();
    const double recall = recall_at(r, exact_ids(base, q, k, c), k);
    std::printf("  [%s] recall@%u with %u of %u probes: %.3f (max list %u)\n", c.metric, k, probes, n_lists, recall, mx);
    EXPECT_GE(recall, c.max_order ? 0.6 : 0.8);
    udf_index_destroy(ix);
  }
}

// k-means in two levels (udf_index_params.kmeans_mesoclusters) recalls
// about as the flat k-means does at few probes on clustered data, keeps
// the balance cap, and gives the same file twice; more mesoclusters than
// lists is refused, naming the field.
TEST_F(Fixture, HierarchicalKmeansRecallsAsTheFlatOne) {
  REQUIRE_GPU();
  const int64_t dim = 32, clusters = 600, rows = 60000;
  const uint32_t n_lists = 300, probes = 8, k = 10;
  std::mt19937_64 rng(fresh_seed());
  std::vector<double> centers(clusters * dim);
  std::normal_distribution<double> nd(0, 1);
  for (auto& x : centers) x = nd(rng);
  const Data base = make_data(rng, UDF_DTYPE_F32, rows, dim, clusters, &centers);
  const Data q = make_data(rng, UDF_DTYPE_F32, 200, dim, clusters, &centers);
  udf_tensor t = base.tensor();
  const std::string dir = ::testing::TempDir();
  for (const BuiltinRef& c : builtin_refs()) {
    SCOPED_TRACE(c.metric);
    const std::vector<std::vector<int64_t>> truth = exact_ids(base, q, k, c);
    double recall[3] = {};
    const uint32_t meso[3] = {17, 0, 7};  // sqrt(n_lists), flat (the default), 7 uneven ones
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = n_lists;
    p.kmeans_iters = 10;
    p.seed = rng();
    for (int v = 0; v < 3; ++v) {
      p.kmeans_mesoclusters = meso[v];
      std::vector<uint8_t> first;
      for (int run = 0; run < (v == 0 ? 2 : 1); ++run) {
        udf_index* ix = nullptr;
        ASSERT_EQ(udf_index_build(builtin, c.metric, &t, nullptr, &p, &ix), UDF_OK) << udf_last_error();
        const std::string path = dir + "meso_" + std::to_string(run) + ".udfi";
        ASSERT_EQ(udf_index_save(ix, path.c_str()), UDF_OK) << udf_last_error();
        if (run == 1) {
          EXPECT_TRUE(read_bytes(path) == first) << "a second build wrote another file";
          udf_index_destroy(ix);
          continue;
        }
        first = read_bytes(path);
        std::vector<uint32_t> sizes(n_lists);
        ASSERT_EQ(udf_index_list_sizes(ix, sizes.data(), n_lists), UDF_OK);
        EXPECT_LE(*std::max_element(sizes.begin(), sizes.end()), static_cast<uint32_t>(std::ceil(2.0 * rows / n_lists)));
        EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), uint64_t(0)), uint64_t(rows));
        Result r;
        ASSERT_EQ(search(ix, q, k, probes, r), UDF_OK) << udf_last_error();
        recall[v] = recall_at(r, truth, k);
        udf_index_destroy(ix);
      }
    }
    std::printf("  [%s] recall@%u, %u of %u probes: 17 mesoclusters %.3f, flat %.3f, 7 mesoclusters %.3f\n", c.metric, k,
                probes, n_lists, recall[0], recall[1], recall[2]);
    EXPECT_GE(recall[0], recall[1] - 0.03);
    EXPECT_GE(recall[2], recall[1] - 0.03);
    EXPECT_GE(recall[1], c.max_order ? 0.5 : 0.7);
  }
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = 64;
  p.kmeans_mesoclusters = 65;
  udf_index* ix = nullptr;
  EXPECT_EQ(udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &p, &ix), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("kmeans_mesoclusters"), std::string::npos) << udf_last_error();
  EXPECT_EQ(ix, nullptr);
}

TEST_F(Fixture, BatchesChunksDeviceIoAndThroughput) {
  REQUIRE_GPU();
  const int64_t dim = 64;
  const Data base = make_data(rng, UDF_DTYPE_F32, 100000, dim);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 256, 2.0, 10);
  ASSERT_NE(ix, nullptr);
  const Data q = make_data(rng, UDF_DTYPE_F32, 100000, dim);
  Result whole, chunked;
  // Stage times are off by default (udf_index_set_stage_timing): zeros, the
  // rest of the statistics filled in; on, every stage of a chunked search has a time.
  {
    Result one;
    udf_search_stats st;
    ASSERT_EQ(search(ix, q.rows_of(0, 1), 10, 16, one), UDF_OK) << udf_last_error();
    ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
    EXPECT_GT(st.total_ms, 0.0);
    EXPECT_EQ(st.coarse_ms + st.schedule_ms + st.scan_ms + st.merge_ms, 0.0);
    EXPECT_EQ(st.chunks, 1u);
    EXPECT_GT(st.work_items, 0u);
    EXPECT_EQ(udf_index_set_stage_timing(nullptr, 1), UDF_ERROR_INVALID_ARGUMENT);
  }
  ASSERT_EQ(udf_index_set_stage_timing(ix, 1), UDF_OK);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(search(ix, q, 10, 16, whole), UDF_OK) << udf_last_error();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  udf_search_stats st;
  ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
  std::printf("  100k queries, 100k x 64 f32, 256 lists, 16 probes, k=10: %.1f ms (coarse %.1f, schedule %.1f, scan %.1f, "
              "merge+copy %.1f; %u chunks, qpi %u, %llu items)\n",
              ms, st.coarse_ms, st.schedule_ms, st.scan_ms, st.merge_ms, st.chunks, st.queries_per_item,
              static_cast<unsigned long long>(st.work_items));
  EXPECT_GT(st.coarse_ms, 0.0);
  EXPECT_GT(st.schedule_ms, 0.0) << "a large batch: the list-major schedule kernels";
  EXPECT_GT(st.scan_ms, 0.0);
  EXPECT_GT(st.merge_ms, 0.0);
  EXPECT_GE(st.chunks, 1u);
  ASSERT_EQ(udf_index_set_stage_timing(ix, 0), UDF_OK);
  // Small chunks and forced queries_per_item give the same answer.
  Data q5 = q;
  q5.rows = 5000;
  Result a, b;
  ASSERT_EQ(search(ix, q5, 10, 16, a, {}, 0, 1), UDF_OK);
  ASSERT_EQ(search(ix, q5, 10, 16, b, {}, 777, 8), UDF_OK);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.dist, b.dist);
  for (size_t i = 0; i < a.ids.size(); ++i) ASSERT_EQ(a.ids[i], whole.ids[i]) << i;
  // Device queries and device outputs.
  DevMem dq(q5.bytes.data(), q5.bytes.size()), dd(5000 * 10 * 4), di(5000 * 10 * 8);
  udf_tensor qt = udf::tensor(dq.ptr(), UDF_DTYPE_F32, 5000, dim, 0);
  udf_tensor od = udf::tensor(dd.ptr(), UDF_DTYPE_F32, 5000, 10, 0), oi = udf::tensor(di.ptr(), UDF_DTYPE_I64, 5000, 10, 0);
  udf_search_params p;
  udf_search_params_default(&p);
  p.n_probes = 16;
  ASSERT_EQ(udf_index_search(ix, &qt, &p, &od, &oi), UDF_OK) << udf_last_error();
  std::vector<int64_t> ids(50000);
  ASSERT_EQ(Cu::I().dtoh(ids.data(), di.p, ids.size() * 8), CUDA_SUCCESS);
  EXPECT_EQ(ids, a.ids);
  // Host queries of a few MB are staged in slices (with a row stride, and
  // normalized per slice for cosine): the same as unsliced device queries.
  {
    const int64_t n = 20000, stride = dim + 3;
    std::vector<float> strided(n * stride, -7.0f);
    for (int64_t r = 0; r < n; ++r) std::memcpy(&strided[r * stride], &q.bytes[r * dim * 4], dim * 4);
    udf_tensor st_q = udf::tensor(strided.data(), UDF_DTYPE_F32, n, dim, UDF_HOST_DEVICE, stride);
    std::vector<float> sd(n * 10);
    std::vector<int64_t> si(n * 10);
    udf_tensor sdt = udf::tensor(sd.data(), UDF_DTYPE_F32, n, 10), sit = udf::tensor(si.data(), UDF_DTYPE_I64, n, 10);
    ASSERT_EQ(udf_index_search(ix, &st_q, &p, &sdt, &sit), UDF_OK) << udf_last_error();
    for (size_t i = 0; i < si.size(); ++i) ASSERT_EQ(si[i], whole.ids[i]) << "strided host queries, entry " << i;
    udf_index* cos = build(builtin, "udf_builtin_cosine", base, 256, 2.0, 3);
    ASSERT_NE(cos, nullptr);
    DevMem dq20(q.bytes.data(), n * dim * 4), dd20(n * 10 * 4), di20(n * 10 * 8);
    udf_tensor q20 = udf::tensor(dq20.ptr(), UDF_DTYPE_F32, n, dim, 0);
    udf_tensor od20 = udf::tensor(dd20.ptr(), UDF_DTYPE_F32, n, 10, 0), oi20 = udf::tensor(di20.ptr(), UDF_DTYPE_I64, n, 10, 0);
    ASSERT_EQ(udf_index_search(cos, &q20, &p, &od20, &oi20), UDF_OK) << udf_last_error();
    std::vector<int64_t> dev_ids(n * 10);
    ASSERT_EQ(Cu::I().dtoh(dev_ids.data(), di20.p, dev_ids.size() * 8), CUDA_SUCCESS);
    ASSERT_EQ(udf_index_search(cos, &st_q, &p, &sdt, &sit), UDF_OK) << udf_last_error();
    for (size_t i = 0; i < si.size(); ++i) ASSERT_EQ(si[i], dev_ids[i]) << "cosine, host slices vs device, entry " << i;
    udf_index_destroy(cos);
  }
  // Batch 1 latency.
  Data q1 = q;
  q1.rows = 1;
  Result one;
  ASSERT_EQ(search(ix, q1, 10, 16, one), UDF_OK);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) ASSERT_EQ(search(ix, q1, 10, 16, one), UDF_OK);
  std::printf("  batch 1: %.3f ms per search\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20);
  udf_index_destroy(ix);
}

// The schedule is built on the GPU by one block for small batches (at most
// 4096 (query, list) pairs) and by a chain of grids for larger ones: both
// give what a search of each query alone gives, for several queries per
// item, tiled lists (small batches) and chunks.
TEST_F(Fixture, GpuScheduleSmallAndLargeBatchesAgreeWithSingleQueries) {
  REQUIRE_GPU();
  const int64_t dim = 40;
  std::vector<double> centers(32 * dim);
  std::normal_distribution<double> nd(0, 2);
  for (double& c : centers) c = nd(rng);
  const Data base = make_data(rng, UDF_DTYPE_F32, 30000, dim, 32, &centers);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 200, 2.0, 5);
  ASSERT_NE(ix, nullptr);
  const Data q = make_data(rng, UDF_DTYPE_F32, 1100, dim, 32, &centers);
  const uint32_t k = 20, probes = 15;  // 273 queries x 15 = 4095 pairs: one block; 1100: the grids
  Data small = q;
  small.rows = 273;
  Result big, one_block, forced_qpi, chunked;
  ASSERT_EQ(search(ix, q, k, probes, big), UDF_OK) << udf_last_error();
  udf_search_stats st;
  ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
  EXPECT_GT(st.work_items, 0u);
  ASSERT_EQ(search(ix, small, k, probes, one_block), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(ix, q, k, probes, forced_qpi, {}, 0, 5), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(ix, q, k, probes, chunked, {}, 97, 3), UDF_OK) << udf_last_error();
  for (size_t i = 0; i < one_block.ids.size(); ++i) {
    ASSERT_EQ(one_block.ids[i], big.ids[i]) << "row " << i / k;
    ASSERT_EQ(one_block.dist[i], big.dist[i]) << "row " << i / k;
  }
  EXPECT_EQ(forced_qpi.ids, big.ids);
  EXPECT_EQ(chunked.ids, big.ids);
  EXPECT_EQ(chunked.dist, big.dist);
  for (int64_t qi : {int64_t(0), int64_t(517), int64_t(1099)}) {  // alone: tiles across the SMs
    const Data q1 = q.rows_of(qi, 1);
    Result r1;
    ASSERT_EQ(search(ix, q1, k, probes, r1), UDF_OK) << udf_last_error();
    for (uint32_t j = 0; j < k; ++j) {
      EXPECT_EQ(r1.ids[j], big.ids[qi * k + j]) << "query " << qi << " rank " << j;
      EXPECT_EQ(r1.dist[j], big.dist[qi * k + j]) << "query " << qi << " rank " << j;
    }
  }
  // Many probes for one query (150 of 200 lists: the direct schedule with
  // several probes a thread when it plans the tiles) against the same
  // queries in a list-major batch.
  {
    const uint32_t many = 150;
    Result batch_many;
    ASSERT_EQ(search(ix, small, k, many, batch_many), UDF_OK) << udf_last_error();
    for (int64_t qi : {int64_t(3), int64_t(200)}) {
      const Data q1 = q.rows_of(qi, 1);
      Result r1;
      ASSERT_EQ(search(ix, q1, k, many, r1), UDF_OK) << udf_last_error();
      udf_search_stats st1;
      ASSERT_EQ(udf_index_last_search_stats(ix, &st1), UDF_OK);
      EXPECT_EQ(st1.queries_per_item, 1u);
      for (uint32_t j = 0; j < k; ++j) {
        EXPECT_EQ(r1.ids[j], batch_many.ids[qi * k + j]) << "150 probes, query " << qi << " rank " << j;
        EXPECT_EQ(r1.dist[j], batch_many.dist[qi * k + j]) << "150 probes, query " << qi << " rank " << j;
      }
    }
  }
  // Every query's ids are distinct and its distances sorted.
  for (int64_t qi = 0; qi < q.rows; ++qi) {
    std::vector<int64_t> ids(big.ids.begin() + qi * k, big.ids.begin() + (qi + 1) * k);
    ASSERT_TRUE(std::is_sorted(big.dist.begin() + qi * k, big.dist.begin() + (qi + 1) * k)) << qi;
    std::sort(ids.begin(), ids.end());
    ASSERT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end()) << qi;
  }
  udf_index_destroy(ix);
}

// Tiny batches (one query an item, few pairs) skip the schedule kernels: the
// coarse selection cuts each probe into tiles itself (ivf_index_v1.h, the
// direct schedule), and the scan's last block of each query merges its rows
// (ivf_flat_v1.h, the tail merge), or, with udf_testing_paths' kPathNoTailMerge
// (the path of scans without a tail merge), every probe gets the longest
// list's tile count and the merge kernel runs.  Lists of very different
// lengths (no balance cap) leave the short ones with empty tiles; the
// results are the list-major schedule's, bit for bit, every probed vector is
// counted once, and probing every list is exact.
// The direct kernel's selection of a tiny batch's probes (a bound, then the
// rank of the keys under it; the warp path when more than 256 keys are at
// or under the bound) picks the lists the list-major path's selection does.
// Inner product with a zero query ties all coarse keys (the fallback,
// ties to the smaller list); random queries take the bounded path.  4096
// lists: the block's static and dynamic shared memory pass 48 KB.
TEST_F(Fixture, DirectSelectionOfManyListsAgreesWithListMajor) {
  REQUIRE_GPU();
  for (uint32_t n_lists : {512u, 4096u}) {
    SCOPED_TRACE("n_lists " + std::to_string(n_lists));
    std::mt19937_64 rng(fresh_seed());
    const int64_t dim = 16;
    const uint32_t k = 10;
    const Data base = make_data(rng, UDF_DTYPE_F32, 20000, dim, 64);
    udf_index* ix = build(builtin, "udf_builtin_inner_product", base, n_lists, 0.0, 3);
    ASSERT_NE(ix, nullptr);
    Data q = make_data(rng, UDF_DTYPE_F32, 4, dim);
    std::fill(q.bytes.begin(), q.bytes.begin() + dim * 4, uint8_t(0));  // query 0: zero
    std::fill(q.v.begin(), q.v.begin() + dim, 0.0);
    for (uint32_t probes : {1u, 8u, 32u}) {
      SCOPED_TRACE("n_probes " + std::to_string(probes));
      Result list_major;
      ASSERT_EQ(search(ix, q, k, probes, list_major, {}, 0, 2), UDF_OK) << udf_last_error();
      udf_search_stats st;
      ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
      ASSERT_EQ(st.queries_per_item, 2u);
      for (int64_t i = 0; i < q.rows; ++i) {
        SCOPED_TRACE("query " + std::to_string(i));
        Result direct;
        ASSERT_EQ(search(ix, q.rows_of(i, 1), k, probes, direct), UDF_OK) << udf_last_error();
        ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
        ASSERT_EQ(st.queries_per_item, 1u);
        for (uint32_t j = 0; j < k; ++j) {
          ASSERT_EQ(direct.ids[j], list_major.ids[i * k + j]) << "rank " << j;
          ASSERT_EQ(direct.dist[j], list_major.dist[i * k + j]) << "rank " << j;
        }
      }
    }
    udf_index_destroy(ix);
  }
}

TEST_F(Fixture, DirectScheduleOfTinyBatchesAgreesWithListMajor) {
  REQUIRE_GPU();
  struct Unset {
    ~Unset() { udf_testing_paths(0); }
  } unset;
  const int64_t dim = 24;
  const uint32_t n_lists = 8, k = 10;
  const int64_t sizes[n_lists] = {12000, 6000, 3000, 1500, 700, 300, 40, 9};
  Data base;
  base.dtype = UDF_DTYPE_F32;
  base.dim = dim;
  std::normal_distribution<double> nd(0, 4);
  for (uint32_t c = 0; c < n_lists; ++c) {
    std::vector<double> center(dim);
    for (double& x : center) x = nd(rng);
    const Data part = make_data(rng, UDF_DTYPE_F32, sizes[c], dim, 1, &center);
    base.bytes.insert(base.bytes.end(), part.bytes.begin(), part.bytes.end());
    base.v.insert(base.v.end(), part.v.begin(), part.v.end());
    base.rows += sizes[c];
  }
  udf_index* ix = build(builtin, "udf_builtin_l2", base, n_lists, 0.0, 5);
  ASSERT_NE(ix, nullptr);
  std::vector<uint32_t> list_sizes(n_lists);
  ASSERT_EQ(udf_index_list_sizes(ix, list_sizes.data(), n_lists), UDF_OK);
  // Rows (every 97th) as queries, so each probes long and short lists alike.
  Data q;
  q.dtype = UDF_DTYPE_F32;
  q.dim = dim;
  for (int64_t r = 5; r < base.rows; r += 97) {
    q.bytes.insert(q.bytes.end(), base.bytes.begin() + r * dim * 4, base.bytes.begin() + (r + 1) * dim * 4);
    q.v.insert(q.v.end(), base.v.begin() + r * dim, base.v.begin() + (r + 1) * dim);
    ++q.rows;
  }
  for (uint32_t probes : {2u, 5u, n_lists}) {
    SCOPED_TRACE("n_probes " + std::to_string(probes));
    Result list_major;  // two queries an item: the schedule kernels
    ASSERT_EQ(search(ix, q, k, probes, list_major, {}, 0, 2), UDF_OK) << udf_last_error();
    for (const char* tail : {"1", "0"})
    for (int64_t batch : {int64_t(1), int64_t(3)}) {
      if (batch * probes >= 2 * n_lists) continue;  // two queries a list: two an item, list-major
      SCOPED_TRACE(std::string("tail merge ") + tail + ", batch " + std::to_string(batch));
      ASSERT_EQ(udf_testing_paths(*tail == '0' ? kPathNoTailMerge : 0u), UDF_OK) << udf_last_error();
      for (int64_t q0 = 0; q0 + batch <= q.rows; q0 += 7 * batch) {
        const Data part = q.rows_of(q0, batch);
        Result direct;
        const udf_status status = search(ix, part, k, probes, direct);
        ASSERT_EQ(status, UDF_OK) << udf_last_error();
        udf_search_stats st;
        ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
        ASSERT_EQ(st.queries_per_item, 1u);
        EXPECT_EQ(st.work_items % (batch * probes), 0u) << "items are launched on each probe's largest tile count";
        EXPECT_GT(st.work_items, uint64_t(batch * probes)) << "long lists are cut into tiles across the SMs";
        for (int64_t i = 0; i < batch * k; ++i) {
          ASSERT_EQ(direct.ids[i], list_major.ids[q0 * k + i]) << "query " << q0 + i / k << " rank " << i % k;
          ASSERT_EQ(direct.dist[i], list_major.dist[q0 * k + i]) << "query " << q0 + i / k << " rank " << i % k;
        }
        if (probes == n_lists) {
          udf_search_work w{};
          ASSERT_EQ(udf_index_last_search_work(ix, &w), UDF_OK);
          uint64_t groups = 0;
          for (uint32_t s : list_sizes) groups += (s + 31) / 32;
          EXPECT_EQ(w.scored, uint64_t(batch * base.rows));
          EXPECT_EQ(w.list_bytes_read, uint64_t(batch) * groups * 32 * dim * 4);  // f32, dim a multiple of 4
        }
      }
    }
    udf_testing_paths(0);
    if (probes == n_lists) expect_exact(base, q, list_major, k, false, l2, 1e-4);
  }
  udf_index_destroy(ix);
}

// Query bounds (ivf_flat_v1.h): items skip
// candidates above the smallest k-th key that finished rows of their query
// published.  Results equal those of scans without bounds
// (udf_testing_paths' kPathNoQueryBound), bit for bit: coordinates on a grid of 4 values
// make many equal distances across lists (ties at the k-th key); inner
// product (max) makes negative keys; k 10 (warp lists) and k 100 (the block's
// top-k); list-major batches and single queries (the direct schedule, whose
// tail merge takes the bound as its own).  Searches one after another with
// other queries show that no bound is left behind: a stale one (data rows as
// queries leave small k-th distances) would empty the next search's rows.
TEST_F(Fixture, QueryBoundsLeaveResultsUnchanged) {
  REQUIRE_GPU();
  struct Unset {
    ~Unset() { udf_testing_paths(0); }
  } unset;
  const int64_t dim = 12;
  const int64_t rows = 12000;
  std::uniform_int_distribution<int> grid(0, 3);
  Data base;
  base.dtype = UDF_DTYPE_F32;
  base.rows = rows;
  base.dim = dim;
  base.bytes.resize(rows * dim * 4);
  base.v.resize(rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) {
    const float f = static_cast<float>(grid(rng)) - 1.5f;
    std::memcpy(&base.bytes[i * 4], &f, 4);
    base.v[i] = f;
  }
  // Queries: data rows (exact hits, small k-th distances) and points off the grid.
  const Data near = base.rows_of(100, 300);
  Data far = make_data(rng, UDF_DTYPE_F32, 300, dim);
  for (const char* metric : {"udf_builtin_l2", "udf_builtin_inner_product"}) {
    SCOPED_TRACE(metric);
    udf_index* ix = build(builtin, metric, base, 64, 2.0, 3);
    ASSERT_NE(ix, nullptr);
    for (uint32_t k : {10u, 100u}) {
      for (uint32_t probes : {4u, 24u}) {
        SCOPED_TRACE("k " + std::to_string(k) + ", n_probes " + std::to_string(probes));
        // Without bounds first, then with them: list-major batches (near,
        // far, near again) and single queries of each set.
        Result want_near, want_far, want_one_near, want_one_far;
        ASSERT_EQ(udf_testing_paths(kPathNoQueryBound), UDF_OK) << udf_last_error();
        ASSERT_EQ(search(ix, near, k, probes, want_near), UDF_OK) << udf_last_error();
        ASSERT_EQ(search(ix, far, k, probes, want_far), UDF_OK) << udf_last_error();
        ASSERT_EQ(search(ix, near.rows_of(7, 1), k, probes, want_one_near), UDF_OK) << udf_last_error();
        ASSERT_EQ(search(ix, far.rows_of(7, 1), k, probes, want_one_far), UDF_OK) << udf_last_error();
        udf_testing_paths(0);
        Result got;
        ASSERT_EQ(search(ix, near, k, probes, got), UDF_OK) << udf_last_error();
        EXPECT_EQ(got.ids, want_near.ids) << "near batch";
        EXPECT_EQ(got.dist, want_near.dist) << "near batch";
        ASSERT_EQ(search(ix, far, k, probes, got), UDF_OK) << udf_last_error();
        EXPECT_EQ(got.ids, want_far.ids) << "far batch after the near one";
        EXPECT_EQ(got.dist, want_far.dist) << "far batch after the near one";
        ASSERT_EQ(search(ix, near.rows_of(7, 1), k, probes, got), UDF_OK) << udf_last_error();
        udf_search_stats st;
        ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
        EXPECT_EQ(st.queries_per_item, 1u) << "one query: the direct schedule";
        EXPECT_EQ(got.ids, want_one_near.ids) << "one near query";
        EXPECT_EQ(got.dist, want_one_near.dist) << "one near query";
        ASSERT_EQ(search(ix, far.rows_of(7, 1), k, probes, got), UDF_OK) << udf_last_error();
        EXPECT_EQ(got.ids, want_one_far.ids) << "one far query after a near one";
        EXPECT_EQ(got.dist, want_one_far.dist) << "one far query after a near one";
        ASSERT_EQ(search(ix, near, k, probes, got), UDF_OK) << udf_last_error();
        EXPECT_EQ(got.ids, want_near.ids) << "near batch again";
        EXPECT_EQ(got.dist, want_near.dist) << "near batch again";
        // Ties at the k-th key: the rows that equal a near query are many
        // (each grid point is shared); every result is a real row.
        for (int64_t id : got.ids) ASSERT_GE(id, 0);
      }
    }
    udf_index_destroy(ix);
  }
}

// PRUNE (ivf_flat_v1.h): metrics declared monotone (prune.udfm, udfc
// --monotone) stop folding a vector once its partial key is beyond the
// query's bound, and the runtime scans each query's nearest list first.  The
// results are the plain metrics' (udfs.udfm, the same lists through
// udf_index_with_metric), bit for bit: clusters far apart (most vectors stop
// after a few coordinates) and a grid of ties at the k-th key; min and max
// order, a finalize, a capture with a zero weight, f32 and i8; single
// queries (the direct schedule, with the plain or the pruning scan) and
// batches in both schedule orders (one block and the grids); k 1, 10, 32
// (the pruning scans) and 100 (plain).
// f32, f16 or i8 rows with values on a grid of four (-1.5 .. 1.5, exact in
// f16; i8 scaled by 20): many exactly equal distances, for the pruning
// tests' ties.
Data grid_data(std::mt19937_64& rng, udf_dtype t, int64_t n, int64_t dim) {
  std::uniform_int_distribution<int> g(0, 3);
  Data d;
  d.dtype = t;
  d.rows = n;
  d.dim = dim;
  d.bytes.resize(size_t(n * dim) * udf_dtype_size(t));
  d.v.resize(size_t(n * dim));
  for (int64_t i = 0; i < n * dim; ++i) {
    const double x = g(rng) - 1.5;
    if (t == UDF_DTYPE_I8) {
      d.bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(x * 20));
      d.v[i] = x * 20;
    } else if (t == UDF_DTYPE_F16) {
      const uint16_t h = f32_to_f16(static_cast<float>(x));
      std::memcpy(&d.bytes[i * 2], &h, 2);
      d.v[i] = x;
    } else {
      const float f = static_cast<float>(x);
      std::memcpy(&d.bytes[i * 4], &f, 4);
      d.v[i] = f;
    }
  }
  return d;
}

// Each entry (<metric>__..._k32) is in the module twice: the plain scan and its pruning twin.
void expect_pruning_twins(udf_module* m, std::initializer_list<const char*> entries) {
  const std::string mf = udf_module_manifest_json(m);
  for (const char* entry : entries) {
    EXPECT_NE(mf.find(std::string("\"udf_ivf_scan_v1__") + entry + "\""), std::string::npos) << entry;
    EXPECT_NE(mf.find(std::string("\"udf_ivf_scan_v1_prune__") + entry + "\""), std::string::npos) << entry;
  }
}

// The pruning tests' data: 24 cluster centers at corners of the cube (+-2 a
// coordinate) and the weighted L2's weights in [0.25, 3).
struct PruneData {
  static constexpr int64_t dim = 40, rows = 6000;
  std::vector<double> centers = std::vector<double>(24 * dim);
  std::vector<float> w = std::vector<float>(dim);
  explicit PruneData(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> coin(0, 1);
    for (double& c : centers) c = coin(rng) ? 2.0 : -2.0;
    std::uniform_real_distribution<float> uw(0.25f, 3.0f);
    for (float& x : w) x = uw(rng);
  }
};

TEST_F(Fixture, MonotoneMetricsPruneToThePlainResults) {
  REQUIRE_GPU();
  udf_module* prune = nullptr;
  ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/prune.udfm").c_str(), &prune), UDF_OK) << udf_last_error();
  struct Cleanup {
    udf_module* m;
    ~Cleanup() {
      udf_testing_paths(0);
      udf_module_destroy(m);
    }
  } cleanup{prune};
  // Each metric's k 32 scan twice (udf-link 1.6): pruning and plain.
  expect_pruning_twins(prune, {"weighted_l2__f32_f32_min_k32", "l2_sum__f32_f32_min_k32", "int8_l2__i8_i32_min_k32",
                               "neg_l1__f32_f32_max_k32"});
  PruneData pd(rng);
  const int64_t dim = pd.dim, rows = pd.rows;
  const std::vector<double>& centers = pd.centers;
  auto grid = [&](udf_dtype t, int64_t n) { return grid_data(rng, t, n, dim); };
  pd.w[3] = 0.0f;  // still monotone
  udf_tensor wt = udf::tensor(pd.w.data(), UDF_DTYPE_F32, 1, dim);
  struct Case {
    const char* metric;
    udf_dtype dtype;
    bool weighted;
  };
  for (const Case& c : {Case{"weighted_l2", UDF_DTYPE_F32, true}, Case{"l2_sum", UDF_DTYPE_F32, false},
                        Case{"int8_l2", UDF_DTYPE_I8, false}, Case{"neg_l1", UDF_DTYPE_F32, false}}) {
    for (const bool tied : {false, true}) {
      SCOPED_TRACE(std::string(c.metric) + (tied ? ", grid data" : ", clustered data"));
      const Data base = tied ? grid(c.dtype, rows) : make_data(rng, c.dtype, rows, dim, 24, &centers);
      // Queries: stored rows (exact hits), fresh points of the clusters and
      // points between them; 2500 of them for the grid schedule.
      Data near = base.rows_of(100, 300);
      Data far = tied ? grid(c.dtype, 2500) : make_data(rng, c.dtype, 2500, dim, 24, &centers);
      Data loose = make_data(rng, c.dtype, 300, dim);
      udf_index* plain = build(udfs, c.metric, base, 32, 2.0, 4);
      ASSERT_NE(plain, nullptr);
      udf_index* pruned = nullptr;
      ASSERT_EQ(udf_index_with_metric(plain, prune, c.metric, &pruned), UDF_OK) << udf_last_error();
      std::vector<udf_capture_binding> caps;
      if (c.weighted) caps.push_back({"weights", &wt, 0, 0});
      for (uint32_t k : {1u, 10u, 32u, 100u}) {
        for (uint32_t probes : {3u, 12u}) {
          SCOPED_TRACE("k " + std::to_string(k) + ", n_probes " + std::to_string(probes));
          for (const Data* q : {&near, &far, &loose}) {
            for (const Data& qq : {q->rows_of(0, 1), q->rows_of(7, 3), *q}) {
              Result want, got;
              ASSERT_EQ(search(plain, qq, k, probes, want, caps), UDF_OK) << udf_last_error();
              // The runtime's choice of scan (the scan choice: plain for a
              // single query's one-step items), the pruning scan everywhere
              // (single queries too), and without near first.
              for (const auto& [prune_env, order] : {std::pair{"", "1"}, std::pair{"1", "1"}, std::pair{"1", "0"}}) {
                SCOPED_TRACE(std::to_string(qq.rows) + " queries, pruning scan '" + prune_env + "', near first " + order);
                ASSERT_EQ(udf_testing_paths((*prune_env ? kPathPruningScan : 0) | (*order == '0' ? kPathNoNearFirst : 0)), UDF_OK)
                    << udf_last_error();
                ASSERT_EQ(search(pruned, qq, k, probes, got, caps), UDF_OK) << udf_last_error();
                udf_testing_paths(0);
                ASSERT_EQ(got.ids, want.ids);
                ASSERT_EQ(0, std::memcmp(got.dist.data(), want.dist.data(), got.dist.size() * 4));
              }
            }
          }
        }
      }
      udf_index_destroy(pruned);
      udf_index_destroy(plain);
    }
  }
}

// Monotone metrics with filters (prune_filters.udfm, pack 1.16): each f32
// and f16 pair's k 32 filtered scan comes twice too, and the pruning one
// gives the plain one's results bit for bit, for a per-query filter and the
// bitmap, on clustered data (bounds that prune) and on a grid (ties), single
// queries and the list-major schedule, with and without near first.  An
// integer metric's filtered scan has no pruning twin (its unfiltered one does).
TEST_F(Fixture, MonotoneFilteredScansPruneToThePlainResults) {
  REQUIRE_GPU();
  udf_module* pf = nullptr;
  ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/prune_filters.udfm").c_str(), &pf), UDF_OK) << udf_last_error();
  struct Cleanup {
    udf_module* m;
    ~Cleanup() {
      udf_testing_paths(0);
      udf_module_destroy(m);
    }
  } cleanup{pf};
  expect_pruning_twins(pf, {"weighted_l2__where__query_group__f32_f32_min_k32", "weighted_l2__where__udf_builtin_bitmap__f32_f32_min_k32",
                            "f16_l2__where__query_group__f16_f32_min_k32", "neg_l1__where__udf_builtin_bitmap__f32_f32_max_k32",
                            "int8_l2__i8_i32_min_k32"});
  const std::string mf = udf_module_manifest_json(pf);
  EXPECT_NE(mf.find("\"udf_ivf_scan_v1__int8_l2__where__query_group__i8_i32_min_k32\""), std::string::npos);
  EXPECT_EQ(mf.find("udf_ivf_scan_v1_prune__int8_l2__where__"), std::string::npos) << "the integer filtered scans do not prune";
  PruneData pd(rng);
  const int64_t dim = pd.dim, rows = pd.rows;
  const std::vector<double>& centers = pd.centers;
  auto grid = [&](udf_dtype t, int64_t n) { return grid_data(rng, t, n, dim); };
  udf_tensor wt = udf::tensor(pd.w.data(), UDF_DTYPE_F32, 1, dim);
  // The bitmap keeps about half of the ids (ids are the row numbers).
  std::vector<uint8_t> bitmap((rows + 7) / 8);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bitmap) b = static_cast<uint8_t>(byte(rng));
  udf_tensor bt = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bitmap.size()));
  struct Case {
    const char* metric;
    udf_dtype dtype;
    bool weighted;
    const char* filter;
  };
  for (const Case& c : {Case{"weighted_l2", UDF_DTYPE_F32, true, "query_group"}, Case{"weighted_l2", UDF_DTYPE_F32, true, "udf_builtin_bitmap"},
                        Case{"f16_l2", UDF_DTYPE_F16, false, "query_group"}, Case{"neg_l1", UDF_DTYPE_F32, false, "udf_builtin_bitmap"}}) {
    for (const bool tied : {false, true}) {
      SCOPED_TRACE(std::string(c.metric) + " where " + c.filter + (tied ? ", grid data" : ", clustered data"));
      const Data base = tied ? grid(c.dtype, rows) : make_data(rng, c.dtype, rows, dim, 24, &centers);
      Data near = base.rows_of(100, 300);
      Data far = tied ? grid(c.dtype, 2500) : make_data(rng, c.dtype, 2500, dim, 24, &centers);
      udf_index* plain = build(udfs, c.metric, base, 32, 2.0, 4);
      ASSERT_NE(plain, nullptr);
      udf_index* pruned = nullptr;
      ASSERT_EQ(udf_index_with_metric(plain, pf, c.metric, &pruned), UDF_OK) << udf_last_error();
      std::vector<udf_capture_binding> caps;
      if (c.weighted) caps.push_back({"weights", &wt, 0, 0});
      for (const int32_t groups : {2, 7}) {
        std::vector<udf_capture_binding> fcaps;
        if (std::string(c.filter) == "query_group")
          fcaps = {{"n_groups", nullptr, 0, groups}};
        else if (groups == 2)
          fcaps = {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, static_cast<int32_t>(rows)}};
        else
          continue;  // one bitmap
        for (uint32_t k : {1u, 10u, 32u}) {
          for (uint32_t probes : {3u, 12u}) {
            SCOPED_TRACE("k " + std::to_string(k) + ", n_probes " + std::to_string(probes) + ", groups " + std::to_string(groups));
            for (const Data* q : {&near, &far}) {
              for (const Data& qq : {q->rows_of(0, 1), q->rows_of(7, 3), *q}) {
                auto run = [&](uint32_t paths, Result& r) {
                  udf_search_params p = search_params(k, probes, 0, 0);
                  p.captures = caps.data();
                  p.n_captures = caps.size();
                  p.filter = c.filter;
                  p.filter_captures = fcaps.data();
                  p.n_filter_captures = fcaps.size();
                  EXPECT_EQ(udf_testing_paths(paths), UDF_OK) << udf_last_error();
                  const udf_status st = search_with(pruned, qq, p, r);
                  udf_testing_paths(0);
                  return st;
                };
                Result want, got;
                ASSERT_EQ(run(kPathPlainScan, want), UDF_OK) << udf_last_error();
                // The scan choice, the pruning scan everywhere, and without near first.
                for (const uint32_t paths : {0u, kPathPruningScan, kPathPruningScan | kPathNoNearFirst}) {
                  SCOPED_TRACE(std::to_string(qq.rows) + " queries, paths " + std::to_string(paths));
                  ASSERT_EQ(run(paths, got), UDF_OK) << udf_last_error();
                  ASSERT_EQ(got.ids, want.ids);
                  ASSERT_EQ(0, std::memcmp(got.dist.data(), want.dist.data(), got.dist.size() * 4));
                }
              }
            }
          }
        }
      }
      udf_index_destroy(pruned);
      udf_index_destroy(plain);
    }
  }
}

// A tiny batch of host queries (a direct schedule, up to 1 KB of rows) rides
// in the coarse kernel's launch parameters, which stores the rows for the
// scan (ivf_index_v1.h, coarse_keys_inline): every element type, rows of an
// odd byte count (i8 / u8 dim 13: the last word partly padding), one and
// three queries, and rows past 1 KB (f32 dim 300, uploaded as before) give
// the list-major schedule's results (two queries an item, queries uploaded),
// bit for bit.
TEST_F(Fixture, TinyHostBatchesRideInTheCoarseLaunch) {
  REQUIRE_GPU();
  const uint32_t k = 10, probes = 6;
  struct Case {
    const char* module;
    const char* metric;
    udf_dtype t;
  };
  for (const Case& m : {Case{"builtin", "udf_builtin_l2", UDF_DTYPE_F32}, Case{"udfs", "f16_l2", UDF_DTYPE_F16},
                        Case{"udfs", "int8_l2", UDF_DTYPE_I8}, Case{"udfs", "u8_l1", UDF_DTYPE_U8}}) {
    for (const int64_t dim : {int64_t(13), int64_t(300)}) {
      const udf_dtype t = m.t;
      SCOPED_TRACE(std::string(m.metric) + ", dim " + std::to_string(dim));
      const Data base = make_data(rng, t, 6000, dim, 16);
      udf_index* ix = build(module(m.module), m.metric, base, 32, 2.0, 3);
      ASSERT_NE(ix, nullptr);
      const Data q = make_data(rng, t, 8, dim, 16);
      Result list_major;
      ASSERT_EQ(search(ix, q, k, probes, list_major, {}, 0, 2), UDF_OK) << udf_last_error();
      udf_search_stats st;
      ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
      ASSERT_EQ(st.queries_per_item, 2u);
      for (int64_t batch : {int64_t(1), int64_t(3)}) {
        for (int64_t q0 = 0; q0 + batch <= q.rows; q0 += 4) {
          Result tiny;
          ASSERT_EQ(search(ix, q.rows_of(q0, batch), k, probes, tiny), UDF_OK) << udf_last_error();
          ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
          ASSERT_EQ(st.queries_per_item, 1u) << "a direct schedule";
          for (int64_t i = 0; i < batch * k; ++i) {
            ASSERT_EQ(tiny.ids[i], list_major.ids[q0 * k + i]) << "batch " << batch << ", query " << q0 + i / k;
            ASSERT_EQ(tiny.dist[i], list_major.dist[q0 * k + i]) << "batch " << batch << ", query " << q0 + i / k;
          }
        }
      }
      udf_index_destroy(ix);
    }
  }
}

// Equal coarse keys go to the list of the smaller index, in the build's
// assignment and in a search's probe selection alike (the radix select's tie
// path): with centroids sampled from three distinct points (no k-means
// iterations, no balance cap), each point's rows all land in one list, the
// first with its centroid, and a one-probe search finds them there.  The
// search's work figures count exactly those lists.
// A tiny batch over long lists: each query has hundreds of rows (40,000
// vectors in 32 lists, all probed, tiles of 4 groups: at least 40,000 / 128
// = 312 rows a query, thousands of candidates for its merge).  Against the
// float64 brute force, in the tail merge and in the merge kernel, with the
// query bound and with the bound the merge finds from the rows; k 1, 10 and
// 32 (the warps' merge), 100 and 300 (the block's, with its bound from the
// rows' first keys and its sorts only when the buffer could overflow); L2,
// inner product (max order) and int8 L2 (many ties, no tolerance).
TEST_F(Fixture, TinyBatchesOfManyRowsMatchFloat64) {
  REQUIRE_GPU();
  struct Unset {
    ~Unset() { udf_testing_paths(0); }
  } unset;
  struct Case {
    const char* module;
    const char* metric;
    udf_dtype t;
    bool max_order;
    RefFn ref;
    double tol;
  };
  const uint32_t n_lists = 32;
  for (const Case& c : {Case{"builtin", "udf_builtin_l2", UDF_DTYPE_F32, false, l2, 1e-4},
                        Case{"builtin", "udf_builtin_inner_product", UDF_DTYPE_F32, true, ip, 1e-4},
                        Case{"udfs", "int8_l2", UDF_DTYPE_I8, false, l2, 0}}) {
    SCOPED_TRACE(c.metric);
    const Data base = make_data(rng, c.t, 40000, 16);
    udf_index* ix = build(module(c.module), c.metric, base, n_lists, 2.0, 3);
    ASSERT_NE(ix, nullptr);
    for (const char* tail : {"1", "0"}) {
      for (const char* bound : {"1", "0"}) {
        ASSERT_EQ(udf_testing_paths((*tail == '0' ? kPathNoTailMerge : 0) | (*bound == '0' ? kPathNoQueryBound : 0)), UDF_OK)
            << udf_last_error();
        for (uint32_t k : {1u, 10u, 32u, 100u, 300u}) {
          for (int64_t nq : {int64_t(1), int64_t(3)}) {
            SCOPED_TRACE(std::string("tail merge ") + tail + ", query bound " + bound + ", k " + std::to_string(k) +
                         ", " + std::to_string(nq) + " queries");
            const Data q = make_data(rng, c.t, nq, 16);
            Result r;
            ASSERT_EQ(search(ix, q, k, n_lists, r), UDF_OK) << udf_last_error();
            udf_search_stats st;
            ASSERT_EQ(udf_index_last_search_stats(ix, &st), UDF_OK);
            if (nq == 1) {
              EXPECT_EQ(st.queries_per_item, 1u) << "one query: the direct schedule";
            }
            expect_exact(base, q, r, k, c.max_order, c.ref, c.tol);
          }
        }
      }
    }
    udf_index_destroy(ix);
  }
}

TEST_F(Fixture, CoarseTiesGoToTheSmallerListAndWorkIsCounted) {
  REQUIRE_GPU();
  const int64_t dim = 8, per_point = 900;
  Data base;
  base.rows = 3 * per_point;
  base.dim = dim;
  base.bytes.resize(base.rows * dim * 4);
  base.v.resize(base.rows * dim);
  auto point = [](int64_t p, int64_t j) { return float(p + 1) * (j % 2 ? 1.0f : -0.5f) + 0.25f * float(j); };
  for (int64_t r = 0; r < base.rows; ++r)
    for (int64_t j = 0; j < dim; ++j) {
      const float f = point(r % 3, j);
      std::memcpy(&base.bytes[(r * dim + j) * 4], &f, 4);
      base.v[r * dim + j] = f;
    }
  const uint32_t n_lists = 48;  // a point missing from the sample: p < 1e-8
  udf_index* ix = build(builtin, "udf_builtin_l2", base, n_lists, 0.0, 0);
  ASSERT_NE(ix, nullptr);
  std::vector<uint32_t> sizes(n_lists);
  ASSERT_EQ(udf_index_list_sizes(ix, sizes.data(), n_lists), UDF_OK);
  std::vector<uint32_t> used;
  for (uint32_t l = 0; l < n_lists; ++l)
    if (sizes[l]) used.push_back(sizes[l]);
  EXPECT_EQ(used, std::vector<uint32_t>(3, per_point)) << "rows of one point spread over lists with equal centroids";
  Data q;
  q.rows = 3;
  q.dim = dim;
  q.bytes.assign(base.bytes.begin(), base.bytes.begin() + 3 * dim * 4);
  q.v.assign(base.v.begin(), base.v.begin() + 3 * dim);
  const uint32_t k = 10;
  for (uint32_t probes : {1u, 2u, 7u, n_lists}) {
    SCOPED_TRACE("n_probes " + std::to_string(probes));
    Result r;
    ASSERT_EQ(search(ix, q, k, probes, r, {}, 0, 1), UDF_OK) << udf_last_error();
    for (int64_t qi = 0; qi < 3; ++qi)
      for (uint32_t j = 0; j < k; ++j) {
        ASSERT_EQ(r.dist[qi * k + j], 0.0f) << "query " << qi << " rank " << j;
        ASSERT_EQ(r.ids[qi * k + j] % 3, qi) << "query " << qi << " rank " << j;
      }
    udf_search_work w{};
    ASSERT_EQ(udf_index_last_search_work(ix, &w), UDF_OK);
    // Each query probes its point's list (the others it probes are empty,
    // or, with all lists, the other two points' lists too).
    const uint64_t lists_scored = probes == n_lists ? 3 : 1;
    EXPECT_EQ(w.scored, 3 * lists_scored * per_point);
    const uint64_t group_bytes_min = 32 * dim * 4;  // a group of 32 slots, dim_padded >= dim
    const uint64_t groups = (per_point + 31) / 32;
    EXPECT_GE(w.list_bytes_read, 3 * lists_scored * groups * group_bytes_min);
    EXPECT_EQ(w.list_bytes_read % (3 * lists_scored * groups), 0u);  // one query per item: a list read per query
  }
  EXPECT_EQ(udf_index_last_search_work(ix, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  udf_index_destroy(ix);
}

// The coarse probe's selection of a batch gives each query the probes a
// query alone gets (the direct kernel's own selection, or the batch kernels'
// for one query), and the same as the select kernel's (kPathPlainSelect: the
// warps' lists, the radix select), so the same results bit for bit: the
// bound and sort of the keys under it (select_gather: its keys kept in
// registers up to 4096 lists, read again above; groups of 32 to 256 for
// n_probes up to 256), its fallbacks where thousands of keys are equal (the
// warps' lists for n_probes <= 32, the radix select above), and the
// 1024-thread blocks of batches too small to fill the GPU (select_wide).  Given centroids
// make the ties: the first lists (300 of 1200, 2100 of 5000 and of 16384)
// share one centroid, the rest come in equal pairs; queries sit on those
// centroids or anywhere.
TEST_F(Fixture, BatchCoarseSelectionGivesEachQueryItsProbesAlone) {
  REQUIRE_GPU();
  struct Unset {
    ~Unset() { udf_testing_paths(0); }
  } unset;
  const int64_t dim = 16;
  for (uint32_t n_lists : {1200u, 5000u, 16384u}) {
    SCOPED_TRACE("n_lists " + std::to_string(n_lists));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> centroids(size_t(n_lists) * dim);
    for (uint32_t l = 0; l < n_lists; ++l) {
      const uint32_t shared = n_lists < 4096 ? 300 : 2100;
      const uint32_t like = l < shared ? 0 : l - (l - shared) % 2;  // the list whose centroid l repeats
      for (int64_t j = 0; j < dim; ++j)
        centroids[l * dim + j] = like == l ? nd(rng) : centroids[size_t(like) * dim + j];
    }
    Data base;
    base.rows = int64_t(n_lists) * 4;
    base.dim = dim;
    base.bytes.resize(size_t(base.rows) * dim * 4);
    base.v.resize(size_t(base.rows) * dim);
    for (int64_t r = 0; r < base.rows; ++r)
      for (int64_t j = 0; j < dim; ++j) {
        const float f = centroids[size_t(r % n_lists) * dim + j] + 0.05f * nd(rng);
        std::memcpy(&base.bytes[(r * dim + j) * 4], &f, 4);
        base.v[r * dim + j] = f;
      }
    udf_index_params ip;
    udf_index_params_default(&ip);
    ip.n_lists = n_lists;
    ip.centroids = centroids.data();
    udf_tensor bt = base.tensor();
    udf_index* ix = nullptr;
    ASSERT_EQ(udf_index_build(builtin, "udf_builtin_l2", &bt, nullptr, &ip, &ix), UDF_OK) << udf_last_error();
    const int64_t n = 1500, alone = 120;
    Data q;
    q.rows = n;
    q.dim = dim;
    q.bytes.resize(size_t(n) * dim * 4);
    q.v.resize(size_t(n) * dim);
    std::uniform_int_distribution<uint32_t> pick(0, n_lists - 1);
    for (int64_t i = 0; i < n; ++i) {
      // Every third query on list 0's centroid (300 equal keys), every third on another list's, the rest anywhere.
      const uint32_t at = i % 3 == 0 ? 0 : pick(rng);
      for (int64_t j = 0; j < dim; ++j) {
        const float f = i % 3 == 2 ? 2.0f * nd(rng) : centroids[size_t(at) * dim + j];
        std::memcpy(&q.bytes[(i * dim + j) * 4], &f, 4);
        q.v[i * dim + j] = f;
      }
    }
    for (uint32_t probes : {1u, 7u, 32u, 64u, 128u, 200u}) {
      SCOPED_TRACE("n_probes " + std::to_string(probes));
      const uint32_t k = 10;
      Result batch, small, other;  // all 1500 queries; the first 300 (under four rows an SM on current GPUs)
      ASSERT_EQ(search(ix, q, k, probes, batch), UDF_OK) << udf_last_error();
      ASSERT_EQ(search(ix, q.rows_of(0, 300), k, probes, small), UDF_OK) << udf_last_error();
      ASSERT_EQ(udf_testing_paths(kPathPlainSelect), UDF_OK) << udf_last_error();
      ASSERT_EQ(search(ix, q, k, probes, other), UDF_OK) << udf_last_error();
      ASSERT_EQ(udf_testing_paths(0), UDF_OK) << udf_last_error();
      EXPECT_EQ(other.ids, batch.ids) << "the select kernel alone";
      EXPECT_EQ(std::memcmp(other.dist.data(), batch.dist.data(), batch.dist.size() * 4), 0) << "the select kernel alone";
      for (int64_t i = 0; i < alone; ++i) {
        Result one;
        ASSERT_EQ(search(ix, q.rows_of(i, 1), k, probes, one), UDF_OK) << udf_last_error();
        for (const Result* r : {&batch, &small}) {
          ASSERT_EQ(one.ids, std::vector<int64_t>(r->ids.begin() + i * k, r->ids.begin() + (i + 1) * k))
              << "query " << i << (r == &small ? " (300 queries)" : " (1500 queries)");
          ASSERT_EQ(std::memcmp(one.dist.data(), r->dist.data() + i * k, k * 4), 0) << "query " << i;
        }
      }
    }
    udf_index_destroy(ix);
  }
}

// udf_index_search_async on the caller's streams: the same results as the
// blocking call, host queries staged before it returns, searches of one
// index ordered across streams, stats untouched, host outputs refused.
TEST_F(Fixture, SearchAsyncOnCallerStreams) {
  REQUIRE_GPU();
  const Cu& cu = Cu::I();
  const auto stream_create = cu.stream_create;
  const auto stream_sync = cu.stream_sync;
  const auto stream_destroy = cu.stream_destroy;
  ASSERT_TRUE(stream_create && stream_sync && stream_destroy);
  const int64_t dim = 64;
  const Data base = make_data(rng, UDF_DTYPE_F32, 20000, dim);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 128, 2.0, 5);
  ASSERT_NE(ix, nullptr);
  const int64_t n = 3000;
  const uint32_t k = 10, probes = 8;
  const Data q = make_data(rng, UDF_DTYPE_F32, n, dim);
  Result want;
  ASSERT_EQ(search(ix, q, k, probes, want), UDF_OK) << udf_last_error();
  udf_search_stats before;
  ASSERT_EQ(udf_index_last_search_stats(ix, &before), UDF_OK);

  CUstream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(stream_create(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(stream_create(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  DevMem dq(q.bytes.data(), q.bytes.size());
  DevMem d1(n * k * 4), i1(n * k * 8), d2(n * k * 4), i2(n * k * 8);
  udf_search_params p;
  udf_search_params_default(&p);
  p.k = k;
  p.n_probes = probes;
  udf_tensor qdev = udf::tensor(dq.ptr(), UDF_DTYPE_F32, n, dim, 0);
  udf_tensor od1 = udf::tensor(d1.ptr(), UDF_DTYPE_F32, n, k, 0), oi1 = udf::tensor(i1.ptr(), UDF_DTYPE_I64, n, k, 0);
  udf_tensor od2 = udf::tensor(d2.ptr(), UDF_DTYPE_F32, n, k, 0), oi2 = udf::tensor(i2.ptr(), UDF_DTYPE_I64, n, k, 0);
  // Device queries on s1, then host queries (overwritten as soon as the call returns) on s2, small chunks.
  std::vector<uint8_t> hq = q.bytes;
  udf_tensor qhost = udf::tensor(hq.data(), UDF_DTYPE_F32, n, dim);
  ASSERT_EQ(udf_index_search_async(ix, &qdev, &p, &od1, &oi1, s1), UDF_OK) << udf_last_error();
  p.max_batch = 700;
  ASSERT_EQ(udf_index_search_async(ix, &qhost, &p, &od2, &oi2, s2), UDF_OK) << udf_last_error();
  std::fill(hq.begin(), hq.end(), 0xFF);  // NaNs: a search still reading them would return garbage
  ASSERT_EQ(stream_sync(s2), CUDA_SUCCESS);
  ASSERT_EQ(stream_sync(s1), CUDA_SUCCESS);
  for (auto [dd, di] : {std::pair{&d1, &i1}, std::pair{&d2, &i2}}) {
    std::vector<float> dist(n * k);
    std::vector<int64_t> ids(n * k);
    ASSERT_EQ(Cu::I().dtoh(dist.data(), dd->p, dist.size() * 4), CUDA_SUCCESS);
    ASSERT_EQ(Cu::I().dtoh(ids.data(), di->p, ids.size() * 8), CUDA_SUCCESS);
    EXPECT_EQ(ids, want.ids);
    EXPECT_EQ(dist, want.dist);
  }
  // One query on the runtime's stream (NULL), then the stats are still the blocking call's.
  Data q1 = q;
  q1.rows = 1;
  udf_tensor q1t = q1.tensor();
  udf_tensor od1r = udf::tensor(d1.ptr(), UDF_DTYPE_F32, 1, k, 0), oi1r = udf::tensor(i1.ptr(), UDF_DTYPE_I64, 1, k, 0);
  p.max_batch = 0;
  ASSERT_EQ(udf_index_search_async(ix, &q1t, &p, &od1r, &oi1r, nullptr), UDF_OK) << udf_last_error();
  std::vector<int64_t> ids1(k);
  void* rs = nullptr;
  ASSERT_EQ(udf_runtime_stream(gpu().rt, &rs), UDF_OK);
  ASSERT_EQ(stream_sync(static_cast<CUstream>(rs)), CUDA_SUCCESS);
  ASSERT_EQ(Cu::I().dtoh(ids1.data(), i1.p, k * 8), CUDA_SUCCESS);
  EXPECT_EQ(ids1, std::vector<int64_t>(want.ids.begin(), want.ids.begin() + k));
  udf_search_stats after;
  ASSERT_EQ(udf_index_last_search_stats(ix, &after), UDF_OK);
  EXPECT_EQ(after.total_ms, before.total_ms);
  EXPECT_EQ(after.work_items, before.work_items);
  // Host outputs are refused, naming the blocking call.
  Result host_out;
  host_out.dist.resize(n * k);
  host_out.ids.resize(n * k);
  udf_tensor hd = udf::tensor(host_out.dist.data(), UDF_DTYPE_F32, n, k);
  udf_tensor hi = udf::tensor(host_out.ids.data(), UDF_DTYPE_I64, n, k);
  EXPECT_EQ(udf_index_search_async(ix, &qdev, &p, &hd, &hi, s1), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("udf_index_search"), std::string::npos) << udf_last_error();
  // Destroying the index waits for a search still queued.
  ASSERT_EQ(udf_index_search_async(ix, &qdev, &p, &od1, &oi1, s1), UDF_OK) << udf_last_error();
  udf_index_destroy(ix);
  ASSERT_EQ(stream_sync(s1), CUDA_SUCCESS);
  stream_destroy(s1);
  stream_destroy(s2);
}

// udf_runtime_wait_stream: a blocking search of device queries that a
// caller's stream is still writing reads them once that stream has: the
// stream is held by a host function for 200 ms, then copies the queries
// over NaNs; the search, called at once, must return the true results.
namespace {
void CUDA_CB sleep_200ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }
}  // namespace

TEST_F(Fixture, WaitStreamOrdersTheNextCallAfterTheCallersStream) {
  REQUIRE_GPU();
  const Cu& cu = Cu::I();
  const auto stream_create = cu.stream_create;
  const auto stream_sync = cu.stream_sync;
  const auto stream_destroy = cu.stream_destroy;
  const auto host_func = cu.host_func;
  const auto htod_async = cu.htod_async;
  ASSERT_TRUE(stream_create && stream_sync && stream_destroy && host_func && htod_async);
  const int64_t dim = 32, n = 500;
  const uint32_t k = 10, probes = 8;
  const Data base = make_data(rng, UDF_DTYPE_F32, 10000, dim);
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 64, 2.0, 5);
  ASSERT_NE(ix, nullptr);
  const Data q = make_data(rng, UDF_DTYPE_F32, n, dim);
  Result want;
  ASSERT_EQ(search(ix, q, k, probes, want), UDF_OK) << udf_last_error();
  std::vector<uint8_t> nans(q.bytes.size(), 0xFF);
  DevMem dq(nans.data(), nans.size());
  DevMem dd(n * k * 4), di(n * k * 8);
  CUstream s = nullptr;
  ASSERT_EQ(stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(host_func(s, sleep_200ms, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(htod_async(dq.p, q.bytes.data(), q.bytes.size(), s), CUDA_SUCCESS);
  ASSERT_EQ(udf_runtime_wait_stream(gpu().rt, s), UDF_OK) << udf_last_error();
  udf_search_params p;
  udf_search_params_default(&p);
  p.k = k;
  p.n_probes = probes;
  udf_tensor qdev = udf::tensor(dq.ptr(), UDF_DTYPE_F32, n, dim, 0);
  udf_tensor od = udf::tensor(dd.ptr(), UDF_DTYPE_F32, n, k, 0), oi = udf::tensor(di.ptr(), UDF_DTYPE_I64, n, k, 0);
  ASSERT_EQ(udf_index_search(ix, &qdev, &p, &od, &oi), UDF_OK) << udf_last_error();
  std::vector<int64_t> ids(n * k);
  ASSERT_EQ(Cu::I().dtoh(ids.data(), di.p, ids.size() * 8), CUDA_SUCCESS);
  EXPECT_EQ(ids, want.ids);
  ASSERT_EQ(stream_sync(s), CUDA_SUCCESS);
  stream_destroy(s);
  EXPECT_EQ(udf_runtime_wait_stream(nullptr, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  udf_index_destroy(ix);
}

namespace {
std::vector<uint8_t> crafted_index_file() {
  std::vector<uint8_t> b;
  auto put = [&](const void* p, size_t n) {
    const auto* q = static_cast<const uint8_t*>(p);
    b.insert(b.end(), q, q + n);
  };
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u64 = [&](uint64_t v) { put(&v, 8); };
  auto str = [&](const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  };
  put("\x89UDFIVF\n", 8);
  u32(1);
  u32(0);
  u32(0);  // f32
  u32(2);  // dim
  u32(1);  // n_lists
  u32(0);  // coarse l2
  u64(1);  // size
  u64(1);  // next id
  double bal = 2.0;
  put(&bal, 8);
  str("udf_builtin_l2");
  str("key");
  float cen[2] = {0, 0};
  put(cen, 8);
  u64(1);  // list 0 size
  u64(0);  // id
  put(cen, 8);
  uint8_t h[SHA256_DIGEST_LENGTH];  // trailer: SHA-256 of everything before it
  SHA256(b.data(), b.size(), h);
  b.insert(b.end(), h, h + sizeof h);
  return b;
}

// ---------------------------------------------------------------- filters

// Filters (ABI ivf_flat.filter.v1) in test/modules/filters.udfm: the built-in
// bitmap, query_group (per query, CUDA), price_range (MLIR), odd_ids (LLVM IR).
struct FilterFixture : Fixture {
  udf_module* filters = nullptr;
  void SetUp() override {
    Fixture::SetUp();
    if (!gpu().rt) return;
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/filters.udfm").c_str(), &filters), UDF_OK)
        << udf_last_error();
  }
  void TearDown() override {
    udf_module_destroy(filters);
    Fixture::TearDown();
  }
  // An index with ids 5 * row + 3 (sparse, not the row numbers).
  udf_index* build_sparse(const char* metric, const Data& d, uint32_t n_lists) {
    std::vector<int64_t> ids(d.rows);
    for (int64_t i = 0; i < d.rows; ++i) ids[i] = 5 * i + 3;
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = n_lists;
    p.kmeans_iters = 5;
    udf_tensor t = d.tensor();
    udf_tensor it = udf::tensor(ids.data(), UDF_DTYPE_I64, d.rows, 1);
    udf_index* ix = nullptr;
    EXPECT_EQ(udf_index_build(filters, metric, &t, &it, &p, &ix), UDF_OK) << udf_last_error();
    return ix;
  }
};

using KeepFn = std::function<bool(int64_t query, int64_t id)>;

// Every query's k results against the float64 brute force over the vectors
// the filter keeps (ids 5 * row + 3): the i-th distance is the i-th reference
// distance, each id is kept and its own distance matches, ids are distinct;
// past the kept count, id -1 and the worst distance.  Returns the kept count
// summed over queries.
int64_t expect_exact_kept(const Data& base, const Data& q, const Result& r, uint32_t k, bool max_order, const RefFn& ref,
                          double rel_tol, const KeepFn& keep) {
  int bad = 0;
  int64_t kept_total = 0;
  const float worst = max_order ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  for (int64_t qi = 0; qi < q.rows && bad < 5; ++qi) {
    std::vector<std::pair<double, int64_t>> kept;
    std::unordered_map<int64_t, double> dist_of;
    for (int64_t i = 0; i < base.rows; ++i) {
      const int64_t id = 5 * i + 3;
      if (!keep(qi, id)) continue;
      const double d = ref(&base.v[i * base.dim], &q.v[qi * q.dim], base.dim);
      kept.emplace_back(d, id);
      dist_of[id] = d;
    }
    kept_total += static_cast<int64_t>(kept.size());
    std::sort(kept.begin(), kept.end(), [&](const auto& a, const auto& b) { return max_order ? a.first > b.first : a.first < b.first; });
    std::vector<int64_t> seen;
    for (uint32_t i = 0; i < k; ++i) {
      const float d = r.dist[qi * k + i];
      const int64_t id = r.ids[qi * k + i];
      if (i >= kept.size()) {
        if (id != -1 || d != worst) {
          ADD_FAILURE() << "query " << qi << " rank " << i << " (" << kept.size() << " kept): got (" << d << ", id " << id
                        << "), want padding (" << worst << ", -1)";
          ++bad;
          break;
        }
        continue;
      }
      const double want = kept[i].first;
      const double tol = rel_tol * (1.0 + std::fabs(want));
      auto own = dist_of.find(id);
      if (!(std::fabs(d - want) <= tol) || own == dist_of.end() || !(std::fabs(own->second - d) <= tol) ||
          std::find(seen.begin(), seen.end(), id) != seen.end()) {
        ADD_FAILURE() << "query " << qi << " rank " << i << ": got (" << d << ", id " << id << "), want distance " << want
                      << (own == dist_of.end() ? " (that id is not kept)" : "");
        ++bad;
        break;
      }
      seen.push_back(id);
    }
  }
  EXPECT_EQ(bad, 0);
  return kept_total;
}

// The built-in bitmap at selectivities 100% .. 0%, k above and below the kept
// count, every element type, min and max order; all lists probed, so the
// result must equal the exhaustive search over the kept ids.
TEST_F(FilterFixture, BitmapSelectivitiesEveryElementTypeMatchFloat64) {
  REQUIRE_GPU();
  struct Case {
    const char* metric;
    udf_dtype dtype;
    bool max_order;
    RefFn ref;
    double tol;
    int64_t dim;
  };
  auto l1 = [](const double* x, const double* y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::fabs(x[i] - y[i]);
    return s;
  };
  const std::vector<Case> cases = {
      {"udf_builtin_l2", UDF_DTYPE_F32, false, l2, 1e-4, 37},
      {"udf_builtin_inner_product", UDF_DTYPE_F32, true, ip, 1e-4, 64},
      {"f16_l2", UDF_DTYPE_F16, false, l2, 1e-4, 24},
      {"int8_l2", UDF_DTYPE_I8, false, l2, 0, 45},
      {"u8_l1", UDF_DTYPE_U8, false, l1, 0, 70},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.metric);
    const int64_t rows = 20000;
    const Data base = make_data(rng, c.dtype, rows, c.dim);
    const uint32_t n_lists = 32;
    udf_index* ix = build_sparse(c.metric, base, n_lists);
    ASSERT_NE(ix, nullptr);
    const int64_t n_ids = 5 * rows + 3;
    for (double selectivity : {1.0, 0.5, 0.01, 0.0001, 0.0}) {
      SCOPED_TRACE("selectivity " + std::to_string(selectivity));
      std::vector<uint8_t> bitmap((n_ids + 7) / 8, 0);
      std::bernoulli_distribution take(selectivity);
      for (int64_t i = 0; i < rows; ++i)
        if (selectivity >= 1.0 || take(rng)) bitmap[(5 * i + 3) / 8] |= uint8_t(1u << ((5 * i + 3) % 8));
      auto keep = [&](int64_t, int64_t id) { return id >= 0 && id < n_ids && ((bitmap[id / 8] >> (id % 8)) & 1); };
      udf_tensor bt = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bitmap.size()));
      const std::vector<udf_capture_binding> fc = {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, static_cast<int32_t>(n_ids)}};
      for (uint32_t k : {10u, 200u}) {
        const Data q = make_data(rng, c.dtype, 40, c.dim);
        Result r;
        ASSERT_EQ(search_filtered(ix, q, k, n_lists, r, "udf_builtin_bitmap", fc), UDF_OK) << udf_last_error();
        const int64_t kept = expect_exact_kept(base, q, r, k, c.max_order, c.ref, c.tol, keep);
        if (selectivity == 0.0) {
          EXPECT_EQ(kept, 0);
        }
        if (selectivity == 1.0) {
          EXPECT_EQ(kept, q.rows * rows);
        }
      }
    }
    udf_index_destroy(ix);
  }
}

// A per-query filter (query_group: id % g == query % g), with the queries
// split into chunks (max_batch) so each chunk's query rows are offset, and
// with many queries per work item (the gather queue carries per-query masks).
TEST_F(FilterFixture, PerQueryFilterSeesTheQueryRowAcrossChunks) {
  REQUIRE_GPU();
  for (auto [metric, dtype, dim] : {std::tuple{"udf_builtin_l2", UDF_DTYPE_F32, int64_t(33)}, std::tuple{"u8_l1", UDF_DTYPE_U8, int64_t(48)}}) {
    SCOPED_TRACE(metric);
    const Data base = make_data(rng, dtype, 6000, dim);
    const uint32_t n_lists = 8;
    udf_index* ix = build_sparse(metric, base, n_lists);
    ASSERT_NE(ix, nullptr);
    auto l1 = [](const double* x, const double* y, int64_t n) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::fabs(x[i] - y[i]);
      return s;
    };
    const RefFn ref = dtype == UDF_DTYPE_F32 ? RefFn(l2) : RefFn(l1);
    for (int32_t g : {3, 7, 500}) {
      const std::vector<udf_capture_binding> fc = {{"n_groups", nullptr, 0, g}};
      auto keep = [&](int64_t qrow, int64_t id) { return id % g == qrow % g; };
      for (auto [max_batch, qpi] : {std::pair{0u, 0u}, std::pair{64u, 8u}, std::pair{37u, 1u}}) {
        const Data q = make_data(rng, dtype, 300, dim);
        Result r;
        ASSERT_EQ(search_filtered(ix, q, 20, n_lists, r, "query_group", fc, max_batch, qpi), UDF_OK) << udf_last_error();
        expect_exact_kept(base, q, r, 20, false, ref, dtype == UDF_DTYPE_F32 ? 1e-4 : 0, keep);
      }
    }
    udf_index_destroy(ix);
  }
}

// Filters compiled from MLIR (an f32 array and two f32 scalars) and LLVM IR.
TEST_F(FilterFixture, MlirAndLlvmIrFiltersMatchFloat64) {
  REQUIRE_GPU();
  const int64_t rows = 5000, dim = 29;
  const Data base = make_data(rng, UDF_DTYPE_F32, rows, dim);
  udf_index* ix = build_sparse("udf_builtin_l2", base, 16);
  ASSERT_NE(ix, nullptr);
  const int64_t n_ids = 5 * rows + 3;
  std::vector<float> prices(n_ids);
  std::uniform_real_distribution<float> price(0.0f, 100.0f);
  for (auto& p : prices) p = price(rng);
  udf_tensor pt = udf::tensor(prices.data(), UDF_DTYPE_F32, n_ids, 1);
  const float lo = 20.0f, hi = 30.0f;
  const std::vector<udf_capture_binding> fc = {{"prices", &pt, 0, 0}, {"lo", nullptr, lo, 0}, {"hi", nullptr, hi, 0},
                                                {"n_ids", nullptr, 0, static_cast<int32_t>(n_ids)}};
  const Data q = make_data(rng, UDF_DTYPE_F32, 50, dim);
  Result r;
  ASSERT_EQ(search_filtered(ix, q, 30, 16, r, "price_range", fc), UDF_OK) << udf_last_error();
  expect_exact_kept(base, q, r, 30, false, l2, 1e-4, [&](int64_t, int64_t id) { return prices[id] >= lo && prices[id] <= hi; });
  ASSERT_EQ(search_filtered(ix, q, 30, 16, r, "odd_ids", {}), UDF_OK) << udf_last_error();
  expect_exact_kept(base, q, r, 30, false, l2, 1e-4, [&](int64_t, int64_t id) { return id % 2 != 0; });
  // With few probes the filter still only returns kept ids.
  ASSERT_EQ(search_filtered(ix, q, 30, 2, r, "odd_ids", {}), UDF_OK) << udf_last_error();
  for (int64_t id : r.ids) EXPECT_TRUE(id == -1 || id % 2 != 0) << id;
  udf_index_destroy(ix);
}

// udf_device_array (runtime.h, "device arrays"): a metric's weights and a
// filter's bitmap bound as a device array's view give the host arrays'
// results bit for bit (and the float64 ones), for a single query and a
// batch, search after search; the array keeps the values it was made with
// when the host array changes afterwards.
TEST_F(FilterFixture, DeviceArrayCapturesMatchHostArrays) {
  REQUIRE_GPU();
  const int64_t dim = 48;
  const Data base = make_data(rng, UDF_DTYPE_F32, 3000, dim);
  const Data q = make_data(rng, UDF_DTYPE_F32, 40, dim);
  Weights weights(rng, dim, 0, 4);
  std::vector<float>& w = weights.w;
  const RefFn ref = weights.l2_ref();
  udf_index* ix = build(udfs, "weighted_l2", base, 16);
  ASSERT_NE(ix, nullptr);
  const udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  udf_device_array* wa = nullptr;
  ASSERT_EQ(udf_device_array_create(gpu().rt, &wt, &wa), UDF_OK) << udf_last_error();
  udf_tensor wv{};
  ASSERT_EQ(udf_device_array_tensor(wa, &wv), UDF_OK) << udf_last_error();
  for (const Data& qq : {q.rows_of(7, 1), q}) {
    SCOPED_TRACE(std::to_string(qq.rows) + " queries");
    Result want, got;
    ASSERT_EQ(search(ix, qq, 50, 16, want, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
    for (int again = 0; again < 3; ++again) {
      ASSERT_EQ(search(ix, qq, 50, 16, got, {{"weights", &wv, 0, 0}}), UDF_OK) << udf_last_error();
      expect_exact(base, qq, got, 50, false, ref, 1e-4);
      EXPECT_EQ(got.ids, want.ids);
      EXPECT_EQ(got.dist, want.dist);
    }
  }
  const std::vector<float> made_with = w;
  std::fill(w.begin(), w.end(), 1.0f);  // the array is a snapshot: unchanged
  Result got, want;
  ASSERT_EQ(search(ix, q, 50, 16, got, {{"weights", &wv, 0, 0}}), UDF_OK) << udf_last_error();
  const udf_tensor made_t = udf::tensor(made_with.data(), UDF_DTYPE_F32, 1, dim);
  ASSERT_EQ(search(ix, q, 50, 16, want, {{"weights", &made_t, 0, 0}}), UDF_OK) << udf_last_error();
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.dist, want.dist);
  udf_device_array_destroy(wa);
  udf_index_destroy(ix);
  // A filter's array: the built-in bitmap at about 5% of the ids.
  const int64_t rows = 20000, n_ids = 5 * rows + 3;
  const Data fbase = make_data(rng, UDF_DTYPE_F32, rows, 37);
  udf_index* fx = build_sparse("udf_builtin_l2", fbase, 32);
  ASSERT_NE(fx, nullptr);
  std::vector<uint8_t> bitmap((n_ids + 7) / 8, 0);
  std::bernoulli_distribution take(0.05);
  for (int64_t i = 0; i < rows; ++i)
    if (take(rng)) bitmap[(5 * i + 3) / 8] |= uint8_t(1u << ((5 * i + 3) % 8));
  auto keep = [&](int64_t, int64_t id) { return id >= 0 && id < n_ids && ((bitmap[id / 8] >> (id % 8)) & 1); };
  const udf_tensor bt = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bitmap.size()));
  udf_device_array* ba = nullptr;
  ASSERT_EQ(udf_device_array_create(gpu().rt, &bt, &ba), UDF_OK) << udf_last_error();
  udf_tensor bv{};
  ASSERT_EQ(udf_device_array_tensor(ba, &bv), UDF_OK) << udf_last_error();
  const Data fq = make_data(rng, UDF_DTYPE_F32, 30, 37);
  for (const Data& qq : {fq.rows_of(2, 1), fq}) {
    SCOPED_TRACE(std::to_string(qq.rows) + " filtered queries");
    Result fwant, fgot;
    const std::vector<udf_capture_binding> host_caps = {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, int32_t(n_ids)}};
    const std::vector<udf_capture_binding> dev_caps = {{"bitmap", &bv, 0, 0}, {"n_ids", nullptr, 0, int32_t(n_ids)}};
    ASSERT_EQ(search_filtered(fx, qq, 20, 32, fwant, "udf_builtin_bitmap", host_caps), UDF_OK) << udf_last_error();
    for (int again = 0; again < 2; ++again) {
      ASSERT_EQ(search_filtered(fx, qq, 20, 32, fgot, "udf_builtin_bitmap", dev_caps), UDF_OK) << udf_last_error();
      expect_exact_kept(fbase, qq, fgot, 20, false, l2, 1e-4, keep);
      EXPECT_EQ(fgot.ids, fwant.ids);
      EXPECT_EQ(fgot.dist, fwant.dist);
    }
  }
  udf_device_array_destroy(ba);
  udf_index_destroy(fx);
}

TEST_F(FilterFixture, ModuleListsFiltersAndBadFilterRequestsAreRefused) {
  REQUIRE_GPU();
  size_t n = 0;
  ASSERT_EQ(udf_module_filter_count(filters, &n), UDF_OK);
  EXPECT_EQ(n, 4u);
  size_t bi = 99;
  ASSERT_EQ(udf_module_find_filter(filters, "udf_builtin_bitmap", &bi), UDF_OK) << udf_last_error();
  udf_filter_info fi{};
  ASSERT_EQ(udf_module_filter_info(filters, bi, &fi), UDF_OK);
  EXPECT_STREQ(fi.symbol, "udf_builtin_bitmap");
  EXPECT_EQ(fi.n_captures, 2u);
  udf_capture_info ci{};
  ASSERT_EQ(udf_module_filter_capture_info(filters, bi, 0, &ci), UDF_OK);
  EXPECT_STREQ(ci.name, "bitmap");
  EXPECT_EQ(ci.type, UDF_DTYPE_U8);
  EXPECT_EQ(ci.is_array, 1);
  EXPECT_EQ(udf_module_find_filter(filters, "nope", &bi), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("udf_builtin_bitmap"), std::string::npos) << udf_last_error();
  size_t builtin_filters = 99;
  ASSERT_EQ(udf_module_filter_count(builtin, &builtin_filters), UDF_OK);
  EXPECT_EQ(builtin_filters, 0u);

  const Data base = make_data(rng, UDF_DTYPE_F32, 500, 16);
  udf_index* ix = build_sparse("udf_builtin_inner_product", base, 4);
  ASSERT_NE(ix, nullptr);
  const Data q = make_data(rng, UDF_DTYPE_F32, 3, 16);
  Result r;
  auto untouched = [&] {
    return std::all_of(r.ids.begin(), r.ids.end(), [](int64_t i) { return i == static_cast<int64_t>(0x5A5A5A5A5A5A5A5A); });
  };
  // A filter that is not in the module.
  EXPECT_EQ(search_filtered(ix, q, 5, 4, r, "no_such_filter", {}), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("filter 'no_such_filter' is not in module"), std::string::npos) << udf_last_error();
  EXPECT_TRUE(untouched());
  // In the module but not linked with this metric.
  const std::vector<udf_capture_binding> g = {{"n_groups", nullptr, 0, 3}};
  EXPECT_EQ(search_filtered(ix, q, 5, 4, r, "query_group", g), UDF_ERROR_MISMATCH);
  EXPECT_NE(std::string(udf_last_error()).find("--pair udf_builtin_inner_product:query_group"), std::string::npos) << udf_last_error();
  EXPECT_TRUE(untouched());
  // Captures: unbound, unknown, mistyped, and filter captures without a filter.
  std::vector<uint8_t> bitmap(400, 0xFF);
  udf_tensor bt = udf::tensor(bitmap.data(), UDF_DTYPE_U8, 1, 400);
  std::vector<float> wrong(400);
  udf_tensor wt = udf::tensor(wrong.data(), UDF_DTYPE_F32, 1, 400);
  EXPECT_EQ(search_filtered(ix, q, 5, 4, r, "udf_builtin_bitmap", {{"bitmap", &bt, 0, 0}}), UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("capture 'n_ids:i32' of filter udf_builtin_bitmap is not bound"), std::string::npos)
      << udf_last_error();
  EXPECT_EQ(search_filtered(ix, q, 5, 4, r, "udf_builtin_bitmap", {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, 3200}, {"x", nullptr, 0, 1}}),
            UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("capture 'x' is not declared by filter udf_builtin_bitmap"), std::string::npos)
      << udf_last_error();
  EXPECT_EQ(search_filtered(ix, q, 5, 4, r, "udf_builtin_bitmap", {{"bitmap", &wt, 0, 0}, {"n_ids", nullptr, 0, 3200}}),
            UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("bound to a f32 tensor, expected u8"), std::string::npos) << udf_last_error();
  EXPECT_EQ(search_filtered(ix, q, 5, 4, r, nullptr, {{"n_groups", nullptr, 0, 3}}), UDF_ERROR_CAPTURE);
  EXPECT_NE(std::string(udf_last_error()).find("no filter is named"), std::string::npos) << udf_last_error();
  EXPECT_TRUE(untouched());
  // And the good call works: everything kept, same as unfiltered.
  ASSERT_EQ(search_filtered(ix, q, 5, 4, r, "udf_builtin_bitmap", {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, 3200}}), UDF_OK)
      << udf_last_error();
  Result plain;
  ASSERT_EQ(search(ix, q, 5, 4, plain), UDF_OK) << udf_last_error();
  EXPECT_EQ(r.ids, plain.ids);
  EXPECT_EQ(r.dist, plain.dist);
  udf_index_destroy(ix);
}

}  // namespace

// ------------------------------------------------------------------ run-time link, on demand

namespace {

struct LinkedOnDemand {
  udf_module* m = nullptr;
  ~LinkedOnDemand() { udf_module_destroy(m); }
};

// The number of `"name": "<prefix>...` entries in a module's manifest.
size_t entries_named(udf_module* m, const std::string& prefix) {
  const std::string mf = udf_module_manifest_json(m);
  size_t n = 0;
  for (size_t at = mf.find("\"name\": \"" + prefix); at != std::string::npos; at = mf.find("\"name\": \"" + prefix, at + 1)) ++n;
  return n;
}

// The loaded direct twins (names ending in __direct) of m.
size_t direct_twins(udf_module* m) {
  const std::string mf = udf_module_manifest_json(m);
  size_t n = 0;
  for (size_t at = mf.find("__direct\""); at != std::string::npos; at = mf.find("__direct\"", at + 1)) ++n;
  return n;
}

std::string temp_cache(const char* tag) {
  const std::string d = ::testing::TempDir() + "udf-on-demand-" + tag + "-" + std::to_string(::getpid());
  std::string cmd = "rm -rf '" + d + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return d;
}

}  // namespace

// udf_module_link_ex, on demand: the module starts with no code; a search
// links and loads its k bucket's entries (the k 32 bucket in the background
// from the start; its pruning scan when linked; a single query's direct
// schedule the plain scan's direct twin), and every bucket gives the
// results of the module udf-link made from the same artifacts, bit for bit.  A second module from the same
// cache links nothing and gives the same results.
TEST_F(Fixture, OnDemandLinksEachBucketOnFirstUse) {
  REQUIRE_GPU();
  const std::string art = artifact_dir() + "/prune/weighted_l2.udfa";
  udf_module* prune = nullptr;
  ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/prune.udfm").c_str(), &prune), UDF_OK) << udf_last_error();
  LinkedOnDemand keep_prune{prune};
  const std::string cache = temp_cache("buckets");
  const std::string pack = kernel_pack_dir();
  udf_link_options o = link_options(cache, pack);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.on_demand, 1);
  EXPECT_EQ(o.prefetch_k, 32u);
  udf_artifact_source src{art.c_str(), nullptr, 0, nullptr};
  LinkedOnDemand od;
  ASSERT_EQ(udf_module_link_ex(gpu().rt, &src, 1, &o, &od.m), UDF_OK) << udf_last_error();
  udf_metric_info mi;
  ASSERT_EQ(udf_module_metric_info(od.m, 0, &mi), UDF_OK);
  EXPECT_EQ(mi.max_k, 1024u) << "the largest k it can link";
  EXPECT_EQ(entries_named(od.m, "udf_ivf_"), 0u) << "nothing loaded before a search";

  const int64_t dim = 40, rows = 5000;
  std::vector<double> centers(16 * dim);
  std::uniform_int_distribution<int> coin(0, 1);
  for (double& c : centers) c = coin(rng) ? 2.0 : -2.0;
  const Data base = make_data(rng, UDF_DTYPE_F32, rows, dim, 16, &centers);
  const Data q = make_data(rng, UDF_DTYPE_F32, 300, dim, 16, &centers);
  std::vector<float> w(dim);
  std::uniform_real_distribution<float> uw(0.25f, 3.0f);
  for (float& x : w) x = uw(rng);
  udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, dim);
  std::vector<udf_capture_binding> caps{{"weights", &wt, 0, 0}};
  udf_index* ix = build(od.m, "weighted_l2", base, 16);
  ASSERT_NE(ix, nullptr);
  udf_index* ref = nullptr;
  ASSERT_EQ(udf_index_with_metric(ix, prune, "weighted_l2", &ref), UDF_OK) << udf_last_error();
  auto same_results = [&](const Data& qq, uint32_t k) {
    Result want, got;
    ASSERT_EQ(search(ref, qq, k, 4, want, caps), UDF_OK) << udf_last_error();
    ASSERT_EQ(search(ix, qq, k, 4, got, caps), UDF_OK) << udf_last_error();
    ASSERT_EQ(got.ids, want.ids);
    ASSERT_EQ(0, std::memcmp(got.dist.data(), want.dist.data(), got.dist.size() * 4));
  };
  struct Step {
    uint32_t k;
    size_t scans;  // plain scan entries loaded after the searches (and as many direct twins)
  };
  for (const Step& s : {Step{10, 1}, Step{32, 1}, Step{100, 2}, Step{200, 3}, Step{1000, 4}}) {
    SCOPED_TRACE("k " + std::to_string(s.k));
    // One query first: a direct schedule, which loads the bucket's twin
    // (only: 300 queries then load the scan).
    same_results(q.rows_of(0, 1), s.k);
    EXPECT_EQ(direct_twins(od.m), s.scans) << udf_module_manifest_json(od.m);
    same_results(q, s.k);
    EXPECT_EQ(entries_named(od.m, "udf_ivf_scan_v1__") - direct_twins(od.m), s.scans) << udf_module_manifest_json(od.m);
  }
  EXPECT_EQ(entries_named(od.m, "udf_ivf_merge_v1_min_k"), 4u);
  // The k 32 pruning scan links in the background, last (a search waits
  // for its plain scan only): a search takes it once that link is done, and
  // the scan choice then runs it, with the same results.
  for (int i = 0; i < 600 && entries_named(od.m, "udf_ivf_scan_v1_prune__") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    same_results(q.rows_of(0, 1), 10);
  }
  ASSERT_EQ(entries_named(od.m, "udf_ivf_scan_v1_prune__"), 1u) << "not taken up in 60 s";
  for (uint32_t paths : {0u, kPathPruningScan}) {
    ASSERT_EQ(udf_testing_paths(paths), UDF_OK) << udf_last_error();
    same_results(q, 10);
    same_results(q, 32);
    udf_testing_paths(0);
  }
  udf_index_destroy(ref);
  udf_index_destroy(ix);

  // Linked again from the same cache, every bucket at once: the same results.
  o.on_demand = 0;
  LinkedOnDemand all;
  ASSERT_EQ(udf_module_link_ex(gpu().rt, &src, 1, &o, &all.m), UDF_OK) << udf_last_error();
  EXPECT_EQ(entries_named(all.m, "udf_ivf_"), 9u);
  ix = build(all.m, "weighted_l2", base, 16);
  ASSERT_NE(ix, nullptr);
  ASSERT_EQ(udf_index_with_metric(ix, prune, "weighted_l2", &ref), UDF_OK) << udf_last_error();
  for (uint32_t k : {10u, 100u}) {
    Result want, got;
    ASSERT_EQ(search(ref, q, k, 4, want, caps), UDF_OK) << udf_last_error();
    ASSERT_EQ(search(ix, q, k, 4, got, caps), UDF_OK) << udf_last_error();
    ASSERT_EQ(got.ids, want.ids);
  }
  udf_index_destroy(ref);
  udf_index_destroy(ix);
  std::system(("rm -rf '" + cache + "'").c_str());
}

// udf_module_link_ex with a metric and a filter: the k 32 bucket's entries
// link in the background, one link an entry (prefetch_order), so a first
// search that is filtered waits for its filtered scan and the merge, and
// neither waits for nor loads the metric's own scan.  It, and an unfiltered search after it, give the
// results of the module with every entry linked, bit for bit.
TEST_F(Fixture, OnDemandFirstSearchFiltered) {
  REQUIRE_GPU();
  const std::string metric = artifact_dir() + "/linf.udfa", filter = artifact_dir() + "/filters/odd_ids.udfa";
  const std::string cache = temp_cache("filtered");
  const std::string pack = kernel_pack_dir();
  udf_link_options o = link_options(cache, pack);
  o.max_k = 32;
  o.threads = 5;  // the first bucket's five links (merge, two direct twins, scan, filtered scan) at once, on any machine
  udf_artifact_source src[2] = {{metric.c_str(), nullptr, 0, nullptr}, {filter.c_str(), nullptr, 0, nullptr}};
  LinkedOnDemand od, all;
  {
    const ScopedEnv profile("UDF_PROFILE_LINK", "1");  // read when the module is made: the search below prints its links
    ASSERT_EQ(udf_module_link_ex(gpu().rt, src, 2, &o, &od.m), UDF_OK) << udf_last_error();
  }
  o.on_demand = 0;
  ASSERT_EQ(udf_module_link_ex(gpu().rt, src, 2, &o, &all.m), UDF_OK) << udf_last_error();
  EXPECT_EQ(entries_named(od.m, "udf_ivf_"), 0u) << "nothing loaded before a search";
  const Data base = make_data(rng, UDF_DTYPE_F32, 4000, 24);
  const Data q = make_data(rng, UDF_DTYPE_F32, 60, 24);
  udf_index* ix = build(od.m, "linf", base, 16);
  ASSERT_NE(ix, nullptr);
  udf_index* ref = nullptr;
  ASSERT_EQ(udf_index_with_metric(ix, all.m, "linf", &ref), UDF_OK) << udf_last_error();
  Result want, got;
  ASSERT_EQ(search_filtered(ref, q, 10, 4, want, "odd_ids", {}), UDF_OK) << udf_last_error();
  testing::internal::CaptureStderr();
  const udf_status searched = search_filtered(ix, q, 10, 4, got, "odd_ids", {});
  const std::string profile = testing::internal::GetCapturedStderr();
  ASSERT_EQ(searched, UDF_OK) << udf_last_error();
  // UDF_PROFILE_LINK: the wait, and the filtered scan's background link with its nvJitLink time.
  EXPECT_NE(profile.find("udf link: a search waited from +"), std::string::npos) << profile;
  EXPECT_NE(profile.find("udf link: background link +"), std::string::npos) << profile;
  EXPECT_NE(profile.find(" udf_ivf_scan_v1__linf__where__odd_ids__f32_f32_min_k32 "), std::string::npos) << profile;
  ASSERT_EQ(got.ids, want.ids);
  ASSERT_EQ(0, std::memcmp(got.dist.data(), want.dist.data(), got.dist.size() * 4));
  for (int64_t id : got.ids) EXPECT_TRUE(id < 0 || id % 2 == 1) << id;
  EXPECT_EQ(entries_named(od.m, "udf_ivf_scan_v1__linf__where__odd_ids"), 1u) << udf_module_manifest_json(od.m);
  EXPECT_EQ(entries_named(od.m, "udf_ivf_scan_v1__linf__f32"), 0u) << "it waited for and loaded the metric's own scan";
  EXPECT_EQ(profile.find(" udf_ivf_scan_v1__linf__f32_f32_min_k32 "), std::string::npos) << profile;
  ASSERT_EQ(search(ref, q, 10, 4, want, {}), UDF_OK) << udf_last_error();
  ASSERT_EQ(search(ix, q, 10, 4, got, {}), UDF_OK) << udf_last_error();
  ASSERT_EQ(got.ids, want.ids);
  ASSERT_EQ(0, std::memcmp(got.dist.data(), want.dist.data(), got.dist.size() * 4));
  EXPECT_EQ(entries_named(od.m, "udf_ivf_scan_v1__linf__f32"), 1u) << udf_module_manifest_json(od.m);
  udf_index_destroy(ref);
  udf_index_destroy(ix);
  std::system(("rm -rf '" + cache + "'").c_str());
}

// A first search of a tiny batch (a direct schedule) on demand waits for
// its scan's direct twin (ivf_flat_v1.h, DIRECT TWIN), the shorter link,
// and not for the scan: filtered and unfiltered, it loads the twin only and
// gives the results of the module with every entry linked, bit for bit.  A
// larger batch (list-major) then loads the scan; with both loaded a tiny
// batch takes the scan again, with the same results.
TEST_F(Fixture, OnDemandTinyFirstSearchTakesTheDirectTwin) {
  REQUIRE_GPU();
  const std::string metric = artifact_dir() + "/linf.udfa", filter = artifact_dir() + "/filters/odd_ids.udfa";
  const std::string cache = temp_cache("direct");
  const std::string pack = kernel_pack_dir();
  udf_link_options o = link_options(cache, pack);
  o.max_k = 32;
  udf_artifact_source src[2] = {{metric.c_str(), nullptr, 0, nullptr}, {filter.c_str(), nullptr, 0, nullptr}};
  LinkedOnDemand od, all;
  ASSERT_EQ(udf_module_link_ex(gpu().rt, src, 2, &o, &od.m), UDF_OK) << udf_last_error();
  o.on_demand = 0;
  ASSERT_EQ(udf_module_link_ex(gpu().rt, src, 2, &o, &all.m), UDF_OK) << udf_last_error();
  EXPECT_EQ(direct_twins(all.m), 0u) << "a whole module has no twins";
  const Data base = make_data(rng, UDF_DTYPE_F32, 4000, 24);
  const Data q = make_data(rng, UDF_DTYPE_F32, 60, 24);
  udf_index* ix = build(od.m, "linf", base, 16);
  ASSERT_NE(ix, nullptr);
  udf_index* ref = nullptr;
  ASSERT_EQ(udf_index_with_metric(ix, all.m, "linf", &ref), UDF_OK) << udf_last_error();
  const std::string scan = "udf_ivf_scan_v1__linf__f32_f32_min_k32", filtered = "udf_ivf_scan_v1__linf__where__odd_ids__f32_f32_min_k32";
  auto loaded = [&](const std::string& name) { return std::string(udf_module_manifest_json(od.m)).find("\"" + name + "\"") != std::string::npos; };
  auto same = [&](const Data& qq, bool filtered_search) {
    Result want, got;
    if (filtered_search) {
      ASSERT_EQ(search_filtered(ref, qq, 10, 4, want, "odd_ids", {}), UDF_OK) << udf_last_error();
      ASSERT_EQ(search_filtered(ix, qq, 10, 4, got, "odd_ids", {}), UDF_OK) << udf_last_error();
      for (int64_t id : got.ids) EXPECT_TRUE(id < 0 || id % 2 == 1) << id;
    } else {
      ASSERT_EQ(search(ref, qq, 10, 4, want, {}), UDF_OK) << udf_last_error();
      ASSERT_EQ(search(ix, qq, 10, 4, got, {}), UDF_OK) << udf_last_error();
    }
    ASSERT_EQ(got.ids, want.ids);
    ASSERT_EQ(0, std::memcmp(got.dist.data(), want.dist.data(), got.dist.size() * 4));
  };
  for (bool f : {true, false}) {
    SCOPED_TRACE(f ? "filtered" : "unfiltered");
    const std::string& name = f ? filtered : scan;
    for (int64_t i = 0; i < 3; ++i) same(q.rows_of(i, 1), f);
    EXPECT_TRUE(loaded(name + "__direct")) << udf_module_manifest_json(od.m);
    EXPECT_FALSE(loaded(name)) << "a tiny batch waited for the scan";
    same(q, f);  // 60 queries at 4 of 16 lists: list-major
    EXPECT_TRUE(loaded(name)) << udf_module_manifest_json(od.m);
    same(q.rows_of(5, 1), f);
  }
  EXPECT_EQ(direct_twins(od.m), 2u);
  udf_index_destroy(ref);
  udf_index_destroy(ix);
  std::system(("rm -rf '" + cache + "'").c_str());
}

// A link a search starts that fails (a metric with an undefined function)
// fails that search with UDF_ERROR_MISMATCH naming the symbol; the module's
// other metric searches on.  max_k caps what the module links; an old
// caller's smaller struct_size is read as such, and a too small one refused.
TEST_F(Fixture, OnDemandLinkFailureFailsTheSearchOnly) {
  REQUIRE_GPU();
  const std::string good = artifact_dir() + "/weighted_l2.udfa", bad = artifact_dir() + "/undef_helper.udfa";
  const std::string cache = temp_cache("failure");
  const std::string pack = kernel_pack_dir();
  udf_link_options o = link_options(cache, pack);
  o.prefetch_k = 0;
  o.max_k = 100;
  udf_artifact_source src[2] = {{good.c_str(), nullptr, 0, nullptr}, {bad.c_str(), nullptr, 0, nullptr}};
  LinkedOnDemand od;
  ASSERT_EQ(udf_module_link_ex(gpu().rt, src, 2, &o, &od.m), UDF_OK) << udf_last_error();
  udf_metric_info mi;
  ASSERT_EQ(udf_module_metric_info(od.m, 0, &mi), UDF_OK);
  EXPECT_EQ(mi.max_k, 128u);
  const Data base = make_data(rng, UDF_DTYPE_F32, 2000, 24);
  const Data q = make_data(rng, UDF_DTYPE_F32, 5, 24);
  std::vector<float> w(24, 1.0f);
  udf_tensor wt = udf::tensor(w.data(), UDF_DTYPE_F32, 1, 24);
  udf_index* bad_ix = build(od.m, "undef_helper_metric", base, 8);
  ASSERT_NE(bad_ix, nullptr);
  Result r;
  EXPECT_EQ(search(bad_ix, q, 10, 2, r, {}), UDF_ERROR_MISMATCH);
  const std::string msg = udf_last_error();
  EXPECT_NE(msg.find("undefined symbol: missing_helper"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undef_helper_metric"), std::string::npos) << msg;
  EXPECT_EQ(search(bad_ix, q, 129, 2, r, {}), UDF_ERROR_INVALID_ARGUMENT) << "beyond max_k";
  udf_index* good_ix = build(od.m, "weighted_l2", base, 8);
  ASSERT_NE(good_ix, nullptr);
  EXPECT_EQ(search(good_ix, q, 10, 2, r, {{"weights", &wt, 0, 0}}), UDF_OK) << udf_last_error();
  EXPECT_EQ(search(bad_ix, q, 10, 2, r, {}), UDF_ERROR_MISMATCH) << "fails again, not a stale module";
  udf_index_destroy(good_ix);
  udf_index_destroy(bad_ix);

  // struct_size: a caller compiled before the last fields existed (here: up
  // to no_cache) gets their defaults (the kernel pack: $UDF_KERNEL_PACK_DIR,
  // which the staged .device/ layout needs: it has no share/udf/kernels next
  // to the library); one too small for on_demand is refused.
  const ScopedEnv pack_env("UDF_KERNEL_PACK_DIR", pack);
  udf_link_options small;
  udf_link_options_default(&small);
  small.struct_size = offsetof(udf_link_options, exact);
  small.no_cache = 1;
  small.cache_dir = "/nonexistent/never-read";
  LinkedOnDemand m2;
  EXPECT_EQ(udf_module_link_ex(gpu().rt, src, 1, &small, &m2.m), UDF_OK) << udf_last_error();
  small.struct_size = 4;
  udf_module* none = reinterpret_cast<udf_module*>(0x1);
  EXPECT_EQ(udf_module_link_ex(gpu().rt, src, 1, &small, &none), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(udf_last_error()).find("struct_size"), std::string::npos) << udf_last_error();
  std::system(("rm -rf '" + cache + "'").c_str());
}
