// DLPack / Arrow C Device interop (include/udf/runtime_interop.h): views and
// lifetimes.  The producer's deleter / release must run exactly once on
// success and on every error path.  Host tensors and fake device tensors
// (device pointers never dereferenced) need no GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "udf/runtime_interop.h"

namespace {

struct Counter {
  int calls = 0;
};

struct FakeDl {
  DLManagedTensor t{};
  int64_t shape[2]{};
  int64_t strides[2]{};
  std::vector<float> data;
  Counter* c;
};

void dl_deleter(DLManagedTensor* self) {
  auto* f = static_cast<FakeDl*>(self->manager_ctx);
  ++f->c->calls;
}

FakeDl make_dl(Counter& c, int64_t rows, int64_t cols, DLDevice dev = {kDLCPU, 0}, DLDataType dt = {kDLFloat, 32, 1},
               int ndim = 2) {
  FakeDl f;
  f.c = &c;
  f.data.assign(static_cast<size_t>(rows * cols), 1.0f);
  f.shape[0] = ndim == 2 ? rows : rows * cols;
  f.shape[1] = cols;
  f.t.dl_tensor = DLTensor{f.data.data(), dev, ndim, dt, f.shape, nullptr, 0};
  f.t.manager_ctx = &f;
  f.t.deleter = dl_deleter;
  return f;
}

TEST(DlPack, HostTensorViewAndSingleRelease) {
  Counter c;
  FakeDl f = make_dl(c, 3, 4);
  f.t.manager_ctx = &f;
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_dlpack(&f.t, &v, &h), UDF_OK) << udf_last_error();
  EXPECT_EQ(v.data, f.data.data());
  EXPECT_EQ(v.device, UDF_HOST_DEVICE);
  EXPECT_EQ(v.dtype, UDF_DTYPE_F32);
  EXPECT_EQ(v.rows, 3);
  EXPECT_EQ(v.cols, 4);
  EXPECT_EQ(v.row_stride, 0);
  EXPECT_EQ(c.calls, 0);
  udf_tensor_handle_release(h);
  EXPECT_EQ(c.calls, 1);
  udf_tensor_handle_release(nullptr);
}

TEST(DlPack, FakeDeviceTensorRowStrideAndOffset) {
  Counter c;
  FakeDl f = make_dl(c, 5, 8, {kDLCUDA, 1}, {kDLFloat, 16, 1});
  f.t.manager_ctx = &f;
  f.t.dl_tensor.data = reinterpret_cast<void*>(0x7f0000001000ULL);  // never dereferenced
  f.t.dl_tensor.byte_offset = 64;
  f.shape[1] = 6;
  f.strides[0] = 8;
  f.strides[1] = 1;
  f.t.dl_tensor.strides = f.strides;
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_dlpack(&f.t, &v, &h), UDF_OK) << udf_last_error();
  EXPECT_EQ(v.device, 1);
  EXPECT_EQ(v.dtype, UDF_DTYPE_F16);
  EXPECT_EQ(v.data, reinterpret_cast<void*>(0x7f0000001000ULL + 64));
  EXPECT_EQ(v.cols, 6);
  EXPECT_EQ(v.row_stride, 8);
  udf_tensor_handle_release(h);
  EXPECT_EQ(c.calls, 1);
}

TEST(DlPack, OneDimensionalIsOneRow) {
  Counter c;
  FakeDl f = make_dl(c, 1, 16, {kDLCPU, 0}, {kDLFloat, 32, 1}, 1);
  f.t.manager_ctx = &f;
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_dlpack(&f.t, &v, &h), UDF_OK);
  EXPECT_EQ(v.rows, 1);
  EXPECT_EQ(v.cols, 16);
  udf_tensor_handle_release(h);
  EXPECT_EQ(c.calls, 1);
}

struct BadCase {
  const char* what;
  void (*spoil)(FakeDl&);
  const char* message;
};

TEST(DlPack, EveryErrorPathCallsTheDeleterOnce) {
  static int64_t bad_strides[2] = {1, 3};  // column-major
  static int64_t shape3[3] = {2, 3, 4};
  const BadCase cases[] = {
      {"wrong dtype", [](FakeDl& f) { f.t.dl_tensor.dtype = {kDLFloat, 64, 1}; }, "dtype float64"},
      {"bfloat16", [](FakeDl& f) { f.t.dl_tensor.dtype = {kDLBfloat, 16, 1}; }, "dtype bfloat16"},
      {"lanes", [](FakeDl& f) { f.t.dl_tensor.dtype = {kDLFloat, 32, 4}; }, "float32x4"},
      {"wrong ndim", [](FakeDl& f) { f.t.dl_tensor.ndim = 3; f.t.dl_tensor.shape = shape3; }, "ndim 3"},
      {"non-contiguous", [](FakeDl& f) { f.t.dl_tensor.strides = bad_strides; }, "non-contiguous"},
      {"wrong device type", [](FakeDl& f) { f.t.dl_tensor.device = {kDLOpenCL, 0}; }, "device type 4"},
      {"ROCm", [](FakeDl& f) { f.t.dl_tensor.device = {kDLROCM, 0}; }, "device type 10"},
      {"null data", [](FakeDl& f) { f.t.dl_tensor.data = nullptr; }, "data is NULL"},
      {"null shape", [](FakeDl& f) { f.t.dl_tensor.shape = nullptr; }, "shape is NULL"},
  };
  for (const auto& bc : cases) {
    Counter c;
    FakeDl f = make_dl(c, 3, 4);
    f.t.manager_ctx = &f;
    bc.spoil(f);
    udf_tensor v{};
    udf_tensor_handle* h = reinterpret_cast<udf_tensor_handle*>(0x1);
    EXPECT_EQ(udf_tensor_from_dlpack(&f.t, &v, &h), UDF_ERROR_INVALID_ARGUMENT) << bc.what;
    EXPECT_EQ(h, nullptr) << bc.what;
    EXPECT_EQ(c.calls, 1) << bc.what;
    EXPECT_NE(std::string(udf_last_error()).find(bc.message), std::string::npos) << bc.what << ": " << udf_last_error();
  }
  // Missing out-parameters: still released once.
  Counter c;
  FakeDl f = make_dl(c, 3, 4);
  f.t.manager_ctx = &f;
  EXPECT_EQ(udf_tensor_from_dlpack(&f.t, nullptr, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(c.calls, 1);
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  EXPECT_EQ(udf_tensor_from_dlpack(nullptr, &v, &h), UDF_ERROR_INVALID_ARGUMENT);
}

struct FakeDlv {
  DLManagedTensorVersioned t{};
  int64_t shape[2]{};
  std::vector<float> data;
  int calls = 0;
};

void dlv_deleter(DLManagedTensorVersioned* self) { ++static_cast<FakeDlv*>(self->manager_ctx)->calls; }

void init_dlv(FakeDlv& f) {
  f.data.assign(12, 0.5f);
  f.shape[0] = 3;
  f.shape[1] = 4;
  f.t.version = {1, 0};
  f.t.manager_ctx = &f;
  f.t.deleter = dlv_deleter;
  f.t.dl_tensor = DLTensor{f.data.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, f.shape, nullptr, 0};
}

TEST(DlPackVersioned, SuccessAndErrors) {
  {
    FakeDlv f;
    init_dlv(f);
    udf_tensor v{};
    udf_tensor_handle* h = nullptr;
    ASSERT_EQ(udf_tensor_from_dlpack_versioned(&f.t, 1, &v, &h), UDF_OK) << udf_last_error();
    EXPECT_EQ(v.rows, 3);
    EXPECT_EQ(f.calls, 0);
    udf_tensor_handle_release(h);
    EXPECT_EQ(f.calls, 1);
  }
  {
    FakeDlv f;
    init_dlv(f);
    f.t.version = {2, 0};
    udf_tensor v{};
    udf_tensor_handle* h = nullptr;
    EXPECT_EQ(udf_tensor_from_dlpack_versioned(&f.t, 0, &v, &h), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(f.calls, 1);
    EXPECT_NE(std::string(udf_last_error()).find("version 2.0"), std::string::npos);
  }
  {
    FakeDlv f;
    init_dlv(f);
    f.t.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    udf_tensor v{};
    udf_tensor_handle* h = nullptr;
    EXPECT_EQ(udf_tensor_from_dlpack_versioned(&f.t, 1, &v, &h), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(f.calls, 1);
    FakeDlv g;
    init_dlv(g);
    g.t.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    ASSERT_EQ(udf_tensor_from_dlpack_versioned(&g.t, 0, &v, &h), UDF_OK);  // read-only input is fine
    udf_tensor_handle_release(h);
    EXPECT_EQ(g.calls, 1);
  }
  {
    FakeDlv f;
    init_dlv(f);
    f.t.dl_tensor.dtype = {kDLUInt, 16, 1};
    udf_tensor v{};
    udf_tensor_handle* h = nullptr;
    EXPECT_EQ(udf_tensor_from_dlpack_versioned(&f.t, 0, &v, &h), UDF_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(f.calls, 1);
  }
}

// ---------------------------------------------------------------- Arrow

struct FakeArrow {
  std::vector<float> values;
  const void* child_buffers[2] = {nullptr, nullptr};
  const void* parent_buffers[1] = {nullptr};
  ArrowArray child{};
  ArrowArray* children[1] = {&child};
  ArrowSchema child_schema{};
  ArrowSchema* schema_children[1] = {&child_schema};
  ArrowSchema schema{};
  std::string format;
  int releases = 0;
  int child_releases = 0;
};

void fake_release(ArrowArray* a) {
  auto* f = static_cast<FakeArrow*>(a->private_data);
  ++f->releases;
  if (a->n_children == 1 && a->children[0]->release) a->children[0]->release(a->children[0]);
  a->release = nullptr;
}
void fake_child_release(ArrowArray* a) {
  ++static_cast<FakeArrow*>(a->private_data)->child_releases;
  a->release = nullptr;
}
void schema_noop(ArrowSchema* s) { s->release = nullptr; }

// rows x dim fixed-size list of float32.
ArrowDeviceArray make_list(FakeArrow& f, int64_t rows, int64_t dim, ArrowDeviceType dev = ARROW_DEVICE_CPU) {
  f.values.assign(static_cast<size_t>(rows * dim), 2.0f);
  f.child_buffers[1] = f.values.data();
  f.child = ArrowArray{rows * dim, 0, 0, 2, 0, f.child_buffers, nullptr, nullptr, fake_child_release, &f};
  f.children[0] = &f.child;
  f.format = "+w:" + std::to_string(dim);
  f.child_schema = ArrowSchema{"f", "item", nullptr, 0, 0, nullptr, nullptr, schema_noop, nullptr};
  f.schema_children[0] = &f.child_schema;
  f.schema = ArrowSchema{f.format.c_str(), "v", nullptr, 0, 1, f.schema_children, nullptr, schema_noop, nullptr};
  ArrowDeviceArray a{};
  a.array = ArrowArray{rows, 0, 0, 1, 1, f.parent_buffers, f.children, nullptr, fake_release, &f};
  a.device_type = dev;
  a.device_id = dev == ARROW_DEVICE_CPU ? -1 : 0;
  return a;
}

TEST(Arrow, FixedSizeListViewAndSingleRelease) {
  FakeArrow f;
  ArrowDeviceArray a = make_list(f, 10, 8);
  a.array.offset = 2;
  a.array.length = 5;
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_arrow_device(&a, &f.schema, &v, &h), UDF_OK) << udf_last_error();
  EXPECT_EQ(a.array.release, nullptr);  // moved
  EXPECT_EQ(v.rows, 5);
  EXPECT_EQ(v.cols, 8);
  EXPECT_EQ(v.data, f.values.data() + 16);
  EXPECT_EQ(v.device, UDF_HOST_DEVICE);
  EXPECT_EQ(f.releases, 0);
  udf_tensor_handle_release(h);
  EXPECT_EQ(f.releases, 1);
  EXPECT_EQ(f.child_releases, 1);
}

TEST(Arrow, FakeCudaDeviceAndPrimitive) {
  FakeArrow f;
  ArrowDeviceArray a = make_list(f, 4, 4, ARROW_DEVICE_CUDA);
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_arrow_device(&a, &f.schema, &v, &h), UDF_OK) << udf_last_error();
  EXPECT_EQ(v.device, 0);
  udf_tensor_handle_release(h);
  EXPECT_EQ(f.releases, 1);

  // A plain int64 array (ids) -> 1 x n.
  FakeArrow g;
  std::vector<int64_t> ids = {5, 6, 7};
  const void* bufs[2] = {nullptr, ids.data()};
  ArrowSchema s{"l", "ids", nullptr, 0, 0, nullptr, nullptr, schema_noop, nullptr};
  ArrowDeviceArray p{};
  p.array = ArrowArray{3, 0, 1, 2, 0, bufs, nullptr, nullptr, fake_release, &g};
  p.device_type = ARROW_DEVICE_CPU;
  ASSERT_EQ(udf_tensor_from_arrow_device(&p, &s, &v, &h), UDF_OK) << udf_last_error();
  EXPECT_EQ(v.dtype, UDF_DTYPE_I64);
  EXPECT_EQ(v.rows, 1);
  EXPECT_EQ(v.cols, 3);
  EXPECT_EQ(v.data, ids.data() + 1);
  udf_tensor_handle_release(h);
  EXPECT_EQ(g.releases, 1);
}

TEST(Arrow, EveryErrorPathReleasesOnce) {
  struct Case {
    const char* what;
    void (*spoil)(FakeArrow&, ArrowDeviceArray&);
    const char* message;
  };
  const Case cases[] = {
      {"wrong dtype", [](FakeArrow& f, ArrowDeviceArray&) { f.child_schema.format = "g"; }, "list of 'g'"},
      {"list of int64", [](FakeArrow& f, ArrowDeviceArray&) { f.child_schema.format = "l"; }, "list of 'l'"},
      {"wrong format", [](FakeArrow& f, ArrowDeviceArray&) { f.schema.format = "+l"; }, "format '+l'"},
      {"bad list size", [](FakeArrow& f, ArrowDeviceArray&) { f.schema.format = "+w:x"; }, "fixed-size list format"},
      {"wrong device type", [](FakeArrow&, ArrowDeviceArray& a) { a.device_type = ARROW_DEVICE_METAL; }, "device type 8"},
      {"nulls", [](FakeArrow&, ArrowDeviceArray& a) { a.array.null_count = 2; }, "nulls"},
      {"short values", [](FakeArrow& f, ArrowDeviceArray&) { f.child.length = 3; }, "shorter"},
      {"no child", [](FakeArrow& f, ArrowDeviceArray&) { f.schema.n_children = 0; }, "without its child"},
  };
  for (const auto& c : cases) {
    FakeArrow f;
    ArrowDeviceArray a = make_list(f, 4, 4);
    c.spoil(f, a);
    udf_tensor v{};
    udf_tensor_handle* h = reinterpret_cast<udf_tensor_handle*>(0x1);
    EXPECT_EQ(udf_tensor_from_arrow_device(&a, &f.schema, &v, &h), UDF_ERROR_INVALID_ARGUMENT) << c.what;
    EXPECT_EQ(h, nullptr) << c.what;
    EXPECT_EQ(f.releases, 1) << c.what;
    EXPECT_EQ(a.array.release, nullptr) << c.what;
    EXPECT_NE(std::string(udf_last_error()).find(c.message), std::string::npos) << c.what << ": " << udf_last_error();
  }
  // A NULL schema: the array is still released once.
  FakeArrow f;
  ArrowDeviceArray a = make_list(f, 2, 2);
  udf_tensor v{};
  udf_tensor_handle* h = nullptr;
  EXPECT_EQ(udf_tensor_from_arrow_device(&a, nullptr, &v, &h), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(f.releases, 1);
  // An already released array is refused without a second release.
  EXPECT_EQ(udf_tensor_from_arrow_device(&a, &f.schema, &v, &h), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(f.releases, 1);
}

// ---------------------------------------------------------------- exports

TEST(Export, HostDlPackOwnsItsBuffer) {
  DLManagedTensor* t = nullptr;
  udf_tensor v{};
  ASSERT_EQ(udf_tensor_alloc_dlpack(UDF_HOST_DEVICE, UDF_DTYPE_I64, 7, 10, &t, &v), UDF_OK) << udf_last_error();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(t->dl_tensor.ndim, 2);
  EXPECT_EQ(t->dl_tensor.shape[0], 7);
  EXPECT_EQ(t->dl_tensor.shape[1], 10);
  EXPECT_EQ(t->dl_tensor.dtype.code, kDLInt);
  EXPECT_EQ(t->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(v.data, t->dl_tensor.data);
  std::memset(t->dl_tensor.data, 0xff, 7 * 10 * 8);  // writable; ASan/valgrind would catch a short buffer
  // Round trip: the exported tensor imports again, and the consumer's release frees it.
  udf_tensor v2{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_dlpack(t, &v2, &h), UDF_OK);
  EXPECT_EQ(v2.rows, 7);
  udf_tensor_handle_release(h);
}

TEST(Export, HostArrowOwnsItsBuffer) {
  ArrowDeviceArray a{};
  ArrowSchema s{};
  udf_tensor v{};
  ASSERT_EQ(udf_tensor_alloc_arrow(UDF_HOST_DEVICE, UDF_DTYPE_F32, 3, 5, 1, &a, &s, &v), UDF_OK) << udf_last_error();
  EXPECT_STREQ(s.format, "+w:5");
  ASSERT_EQ(s.n_children, 1);
  EXPECT_STREQ(s.children[0]->format, "f");
  EXPECT_EQ(a.device_type, ARROW_DEVICE_CPU);
  EXPECT_EQ(a.array.length, 3);
  EXPECT_EQ(a.array.children[0]->length, 15);
  EXPECT_EQ(v.data, a.array.children[0]->buffers[1]);
  // Import it back: the view matches; releasing the handle frees the buffer.
  udf_tensor v2{};
  udf_tensor_handle* h = nullptr;
  ASSERT_EQ(udf_tensor_from_arrow_device(&a, &s, &v2, &h), UDF_OK) << udf_last_error();
  EXPECT_EQ(v2.data, v.data);
  EXPECT_EQ(v2.rows, 3);
  EXPECT_EQ(v2.cols, 5);
  udf_tensor_handle_release(h);
  s.release(&s);
  EXPECT_EQ(s.release, nullptr);

  ArrowDeviceArray p{};
  ArrowSchema ps{};
  EXPECT_EQ(udf_tensor_alloc_arrow(UDF_HOST_DEVICE, UDF_DTYPE_I64, 4, 2, 0, &p, &ps, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(udf_tensor_alloc_arrow(UDF_HOST_DEVICE, UDF_DTYPE_I64, 4, 1, 0, &p, &ps, nullptr), UDF_OK);
  EXPECT_STREQ(ps.format, "l");
  p.array.release(&p.array);
  ps.release(&ps);
}

TEST(Export, BadArgumentsAndNoDriver) {
  DLManagedTensor* t = reinterpret_cast<DLManagedTensor*>(0x1);
  EXPECT_EQ(udf_tensor_alloc_dlpack(UDF_HOST_DEVICE, static_cast<udf_dtype>(42), 1, 1, &t, nullptr),
            UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(udf_tensor_alloc_dlpack(UDF_HOST_DEVICE, UDF_DTYPE_F32, -1, 1, &t, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(udf_tensor_alloc_dlpack(-7, UDF_DTYPE_F32, 1, 1, &t, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  // Device buffers need the driver: without one, a clear error and nothing returned.
  udf_status s = udf_tensor_alloc_dlpack(0, UDF_DTYPE_F32, 2, 2, &t, nullptr);
  if (s != UDF_OK) {
    EXPECT_TRUE(s == UDF_ERROR_NO_DRIVER || s == UDF_ERROR_NO_DEVICE) << udf_status_name(s);
    EXPECT_EQ(t, nullptr);
  } else {
    t->deleter(t);
  }
  DLManagedTensor *d = nullptr, *i = nullptr;
  udf_search_params p;
  udf_search_params_default(&p);
  EXPECT_EQ(udf_index_search_dlpack(nullptr, nullptr, &p, UDF_HOST_DEVICE, &d, &i), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(i, nullptr);
}

}  // namespace
