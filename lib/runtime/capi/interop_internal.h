// The interop's shared pieces (capi/interop.cpp, capi/interop_export.cpp):
// the error record, a driver table of its own (device buffers for exported
// results, Arrow sync events) and the dtype conversions.
#pragma once

#include <cstddef>
#include <string>

#include "udf/runtime_interop.h"

namespace udf_interop {

/// Records the message as udf_last_error() and returns the status.
udf_status fail(udf_status s, const std::string& m);

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUevent = void*;
using CUdeviceptr = unsigned long long;

struct Driver {
  bool ok = false;
  std::string why;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
};

/// libcuda.so.1's functions the interop calls, loaded once (ok false: why).
const Driver& driver();

// A device buffer that keeps its device's primary context retained until freed.
struct DeviceBuffer {
  int device = 0;
  CUcontext ctx = nullptr;
  CUdeviceptr ptr = 0;
};
udf_status device_alloc(int device, size_t bytes, DeviceBuffer& out);
void device_free(const DeviceBuffer& b);

size_t esize(udf_dtype t);
bool dl_dtype(DLDataType t, udf_dtype& out);
DLDataType to_dl(udf_dtype t);
std::string dl_dtype_text(DLDataType t);
/// Fills `view` from a DLTensor; returns UDF_OK or an error (already recorded).
udf_status view_of(const DLTensor& t, udf_tensor& view);
/// The Arrow format string of a dtype.
const char* arrow_format(udf_dtype t);

}  // namespace udf_interop
