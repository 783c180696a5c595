// A runtime-owned device copy of a host array (udf_device_array): made once,
// read in place by every search that binds its view, never written after it
// is made.  Because nothing changes it, a sharded search copies it to each
// other device once and keeps that copy with the array, where a caller's
// device array is copied at every search (it may have changed).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/runtime.h"

namespace udf::rt {

class DeviceArray {
 public:
  /// A copy of `host` (a checked host tensor: dtype known, rows and cols
  /// >= 1, row stride >= cols) on `rt`'s device, complete when this returns.
  /// Registered for find_device_array until it is destroyed.
  static std::shared_ptr<DeviceArray> create(udf_runtime* rt, const udf_tensor& host);
  ~DeviceArray();
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  /// Its view: rows x cols of the host tensor's dtype, packed (row_stride 0),
  /// on the device it was made on.
  const udf_tensor& tensor() const { return view_; }
  size_t bytes() const { return bytes_; }
  /// Its memory on `rt`'s device: the array itself on its own device, else
  /// the copy there, made by the first call for that device (a peer copy on
  /// `stream`, waited for) and kept until the array is destroyed.  Safe to
  /// call from several threads at once.
  CUdeviceptr on(udf_runtime* rt, CUstream stream);

 private:
  // Device memory that holds its device's primary context retained, so that
  // the array may outlive the runtime that made it.
  struct Copy {
    int32_t ordinal = -1;
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    CUdeviceptr ptr = 0;
    Copy(const udf_runtime* rt, size_t bytes);
    ~Copy();
    Copy(const Copy&) = delete;
    Copy& operator=(const Copy&) = delete;
  };
  DeviceArray() = default;

  udf_tensor view_{};
  size_t bytes_ = 0;
  std::unique_ptr<Copy> home_;
  std::mutex mu_;                             // guards copies_
  std::vector<std::unique_ptr<Copy>> copies_;  // on other devices, one a device
};

/// The live device array whose memory begins at `data` and holds at least
/// `bytes` bytes, or null (any other pointer: a caller's own memory).
std::shared_ptr<DeviceArray> find_device_array(const void* data, size_t bytes);

}  // namespace udf::rt
