// Device memory and page-locked host memory, freed on destruction.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "cuda/cuda_dl.h"

namespace udf::rt {

/// Device memory, freed on destruction (the owning context must be current).
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(DevBuf&& o) noexcept : p_(std::exchange(o.p_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DevBuf() { release(); }
  void release() noexcept {
    if (p_) cuda().cuMemFree(p_);
    p_ = 0;
    bytes_ = 0;
  }
  void alloc(size_t n, const char* what) {
    release();
    CUdeviceptr p = 0;
    cu_check(cuda().cuMemAlloc(&p, n ? n : 16), "cuMemAlloc", std::string("allocating ") + std::to_string(n) + " bytes for " + what);
    p_ = p;
    bytes_ = n ? n : 16;
  }
  void ensure(size_t n, const char* what) {
    if (bytes_ < n) alloc(n + n / 4, what);
  }
  CUdeviceptr get() const { return p_; }
  template <class T> T* as() const { return reinterpret_cast<T*>(static_cast<uintptr_t>(p_)); }
  size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr p_ = 0;
  size_t bytes_ = 0;
};

/// Page-locked host memory (fast, asynchronous copies), freed on destruction.
class PinnedBuf {
 public:
  PinnedBuf() = default;
  PinnedBuf(const PinnedBuf&) = delete;
  PinnedBuf& operator=(const PinnedBuf&) = delete;
  ~PinnedBuf() { release(); }
  void release() noexcept {
    if (p_) cuda().cuMemFreeHost(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  /// At least n bytes; the contents are not kept when it grows.  Mapped
  /// into the device's address space too (device()); pinned for every
  /// context (a sharded build's devices copy into one buffer).
  void ensure(size_t n, const char* what) {
    if (bytes_ >= n) return;
    release();
    const size_t want = n + n / 4;
    cu_check(cuda().cuMemHostAlloc(&p_, want ? want : 16, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc",
             std::string("allocating ") + std::to_string(want) + " bytes of pinned memory for " + what);
    bytes_ = want ? want : 16;
    dev_ = 0;
    const CUresult r = cuda().cuMemHostGetDevicePointer(&dev_, p_, 0);
    if (r != CUDA_SUCCESS) {
      release();
      cu_check(r, "cuMemHostGetDevicePointer", std::string("mapping pinned memory for ") + what);
    }
  }
  template <class T> T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  /// The same memory as the device sees it (kernels write it directly).
  CUdeviceptr device() const { return dev_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
  CUdeviceptr dev_ = 0;
};

}  // namespace udf::rt
