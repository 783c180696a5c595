// Device arrays (udf_device_array_*, include/udf/runtime.h): the argument
// checks, which need no GPU, and on a GPU (skipped, with the reason, without
// one) the copy's contents, view and lifetime.  The searches that bind a
// device array are checked in runtime_gpu_test (one GPU:
// Fixture.DeviceArrayCapturesMatchHostArrays) and runtime_shards_test
// (Shards.DeviceArrayCapturesOnEveryShard).
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime_test_support.h"

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ------------------------------------------------------------------ CPU-only

TEST(DeviceArray, NullArgumentsAreRefusedNamingThem) {
  float x[4] = {1, 2, 3, 4};
  udf_tensor host = udf::tensor(x, UDF_DTYPE_F32, 1, 4);
  udf_device_array* a = reinterpret_cast<udf_device_array*>(0x1);
  EXPECT_EQ(udf_device_array_create(nullptr, &host, &a), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(udf_last_error(), "runtime is NULL");
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(udf_device_array_create(nullptr, &host, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(udf_last_error(), "out is NULL");
  udf_tensor view{};
  view.rows = 7;
  EXPECT_EQ(udf_device_array_tensor(nullptr, &view), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(udf_last_error(), "device array is NULL");
  EXPECT_EQ(view.rows, 0);  // cleared
  EXPECT_EQ(view.data, nullptr);
  EXPECT_EQ(udf_device_array_tensor(nullptr, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(udf_last_error(), "out is NULL");
  udf_device_array_destroy(nullptr);
}

// ------------------------------------------------------------------ GPU

// The host tensor's checks, each naming the field at fault.
TEST(DeviceArray, BadHostTensorsAreRefusedNamingTheField) {
  REQUIRE_GPU();
  udf_runtime* rt = gpu().rt;
  std::vector<float> x(12, 1.0f);
  struct Case {
    udf_tensor t;
    const char* says;
  };
  const udf_tensor good = udf::tensor(x.data(), UDF_DTYPE_F32, 3, 4);
  auto with = [&](auto change) {
    udf_tensor t = good;
    change(t);
    return t;
  };
  const std::vector<Case> cases = {
      {with([](udf_tensor& t) { t.dtype = static_cast<udf_dtype>(42); }), "host.dtype = 42 is not a udf_dtype"},
      {with([](udf_tensor& t) { t.device = 0; }), "host is on device 0"},
      {with([](udf_tensor& t) { t.rows = 0; }), "host is 0 x 4"},
      {with([](udf_tensor& t) { t.cols = -1; }), "host is 3 x -1"},
      {with([](udf_tensor& t) { t.row_stride = 3; }), "host.row_stride = 3 is below cols = 4"},
      {with([](udf_tensor& t) { t.rows = int64_t(1) << 62; }), "too large"},
      {with([](udf_tensor& t) { t.data = nullptr; }), "host.data is NULL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    udf_device_array* a = reinterpret_cast<udf_device_array*>(0x1);
    EXPECT_EQ(udf_device_array_create(rt, &c.t, &a), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(udf_last_error(), c.says)) << udf_last_error();
    EXPECT_EQ(a, nullptr);
  }
  udf_device_array* a = nullptr;
  EXPECT_EQ(udf_device_array_create(rt, nullptr, &a), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(udf_last_error(), "host is NULL");
}

// The view holds the host values, packed (a strided host tensor's rows
// gathered), in aligned device memory of the runtime's device; the host
// array may change or go at once; every dtype.
TEST(DeviceArray, ViewHoldsASnapshotOfTheHostValues) {
  REQUIRE_GPU();
  udf_runtime* rt = gpu().rt;
  udf_device_info di{};
  ASSERT_EQ(udf_runtime_device_info(rt, &di), UDF_OK) << udf_last_error();
  for (udf_dtype dt : {UDF_DTYPE_F32, UDF_DTYPE_F16, UDF_DTYPE_I8, UDF_DTYPE_U8, UDF_DTYPE_I32, UDF_DTYPE_I64}) {
    SCOPED_TRACE(udf_dtype_name(dt));
    const size_t es = udf_dtype_size(dt);
    for (auto [rows, cols, stride] : {std::tuple{int64_t(1), int64_t(1000), int64_t(0)},
                                      std::tuple{int64_t(5), int64_t(3), int64_t(0)},
                                      std::tuple{int64_t(5), int64_t(3), int64_t(7)},
                                      std::tuple{int64_t(33), int64_t(1), int64_t(1)}}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + ", row_stride " + std::to_string(stride));
      const int64_t pitch = stride ? stride : cols;
      std::vector<uint8_t> host(size_t(rows * pitch) * es);
      for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7 + 1);
      std::vector<uint8_t> want;
      for (int64_t r = 0; r < rows; ++r)
        want.insert(want.end(), host.begin() + r * pitch * es, host.begin() + (r * pitch + cols) * es);
      udf_tensor t = udf::tensor(host.data(), dt, rows, cols, UDF_HOST_DEVICE, stride);
      udf_device_array* a = nullptr;
      ASSERT_EQ(udf_device_array_create(rt, &t, &a), UDF_OK) << udf_last_error();
      std::fill(host.begin(), host.end(), 0xEE);  // a snapshot: later host changes do not reach it
      udf_tensor v{};
      ASSERT_EQ(udf_device_array_tensor(a, &v), UDF_OK) << udf_last_error();
      EXPECT_EQ(v.device, di.ordinal);
      EXPECT_EQ(v.dtype, dt);
      EXPECT_EQ(v.rows, rows);
      EXPECT_EQ(v.cols, cols);
      EXPECT_EQ(v.row_stride, 0);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data) % 256, 0u);
      std::vector<uint8_t> got(want.size());
      Cu::I().use();
      ASSERT_EQ(Cu::I().dtoh(got.data(), reinterpret_cast<CUdeviceptr>(v.data), got.size()), CUDA_SUCCESS);
      EXPECT_EQ(got, want);
      udf_device_array_destroy(a);
    }
  }
}

// An array outlives the runtime that made it (it holds the device's primary
// context), and arrays may be destroyed from another thread.
TEST(DeviceArray, OutlivesItsRuntimeAndIsDestroyedAnywhere) {
  REQUIRE_GPU();
  udf_runtime* rt = nullptr;
  ASSERT_EQ(udf_runtime_create(0, &rt), UDF_OK) << udf_last_error();
  std::vector<int32_t> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i * 3);
  udf_tensor t = udf::tensor(x.data(), UDF_DTYPE_I32, 1, static_cast<int64_t>(x.size()));
  udf_device_array *a = nullptr, *b = nullptr;
  ASSERT_EQ(udf_device_array_create(rt, &t, &a), UDF_OK) << udf_last_error();
  ASSERT_EQ(udf_device_array_create(rt, &t, &b), UDF_OK) << udf_last_error();
  udf_runtime_destroy(rt);
  udf_tensor v{};
  ASSERT_EQ(udf_device_array_tensor(a, &v), UDF_OK) << udf_last_error();
  std::vector<int32_t> got(x.size());
  Cu::I().use();
  ASSERT_EQ(Cu::I().dtoh(got.data(), reinterpret_cast<CUdeviceptr>(v.data), got.size() * 4), CUDA_SUCCESS);
  EXPECT_EQ(got, x);
  udf_device_array_destroy(a);
  std::thread([b] { udf_device_array_destroy(b); }).join();
}

}  // namespace
