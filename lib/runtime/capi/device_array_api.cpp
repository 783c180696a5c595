// The C API of device arrays (udf_device_array_*): a host array copied once
// into device memory the runtime owns (cuda/device_array.h), for capture
// values bound at many searches.
#include <cstdint>
#include <memory>
#include <string>

#include "capi/api_guard.h"
#include "cuda/device_array.h"

struct udf_device_array {
  std::shared_ptr<udf::rt::DeviceArray> impl;
};

using namespace udf::rt;

namespace {

// The checks of udf_device_array_create's host tensor, with a message naming the field.
void check_host(const udf_tensor* host) {
  require(host != nullptr, "host is NULL");
  require(udf_dtype_size(host->dtype) != 0,
          [&] { return "host.dtype = " + std::to_string(static_cast<int>(host->dtype)) + " is not a udf_dtype"; });
  require(host->device == UDF_HOST_DEVICE, [&] {
    return "host is on device " + std::to_string(host->device) +
           ": udf_device_array_create copies host memory (device UDF_HOST_DEVICE, -1); bind a device array as it is";
  });
  require(host->rows >= 1 && host->cols >= 1, [&] {
    return "host is " + std::to_string(host->rows) + " x " + std::to_string(host->cols) +
           ": a device array needs rows and cols >= 1";
  });
  require(host->row_stride == 0 || host->row_stride >= host->cols, [&] {
    return "host.row_stride = " + std::to_string(host->row_stride) + " is below cols = " + std::to_string(host->cols);
  });
  const uint64_t elems_max = uint64_t(INT64_MAX) / udf_dtype_size(host->dtype);
  require(uint64_t(host->rows) <= elems_max / uint64_t(host->cols),
          [&] { return "host is " + std::to_string(host->rows) + " x " + std::to_string(host->cols) + ": too large"; });
  require(host->data != nullptr, "host.data is NULL");
}

}  // namespace

extern "C" {

UDF_API udf_status udf_device_array_create(udf_runtime* rt, const udf_tensor* host, udf_device_array** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(rt != nullptr, "runtime is NULL");
    check_host(host);
    auto a = std::make_unique<udf_device_array>();
    a->impl = DeviceArray::create(rt, *host);
    *out = a.release();
  });
}

UDF_API udf_status udf_device_array_tensor(const udf_device_array* a, udf_tensor* out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = udf_tensor{};
    require(a != nullptr, "device array is NULL");
    *out = a->impl->tensor();
  });
}

UDF_API void udf_device_array_destroy(udf_device_array* a) { delete a; }

}  // extern "C"
