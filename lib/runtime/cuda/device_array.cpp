#include "cuda/device_array.h"

#include <unordered_map>

#include "cuda/context.h"
#include "cuda/runtime_error.h"

namespace udf::rt {

namespace {

// Every live array by the address of its memory on its own device, so that
// a sharded search can tell an array it may keep copies of (never written)
// from a caller's memory (which may change between searches).
struct Registry {
  std::mutex mu;
  std::unordered_map<CUdeviceptr, std::weak_ptr<DeviceArray>> by_ptr;
};

// Never destroyed: an array freed while the process exits still unregisters.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

DeviceArray::Copy::Copy(const udf_runtime* rt, size_t bytes) : ordinal(rt->ordinal), dev(rt->dev) {
  CU(cuDevicePrimaryCtxRetain, &ctx, dev);
  try {
    CtxGuard g(ctx);
    cu_check(cuda().cuMemAlloc(&ptr, bytes), "cuMemAlloc",
             "allocating " + std::to_string(bytes) + " bytes for a device array");
  } catch (...) {
    cuda().cuDevicePrimaryCtxRelease(dev);
    throw;
  }
}

DeviceArray::Copy::~Copy() {
  const CudaApi& c = cuda();
  if (c.cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {
    c.cuMemFree(ptr);
    CUcontext popped;
    c.cuCtxPopCurrent(&popped);
  }
  c.cuDevicePrimaryCtxRelease(dev);
}

std::shared_ptr<DeviceArray> DeviceArray::create(udf_runtime* rt, const udf_tensor& host) {
  const size_t es = udf_dtype_size(host.dtype);
  const size_t row_bytes = size_t(host.cols) * es;
  const size_t bytes = size_t(host.rows) * row_bytes;
  std::shared_ptr<DeviceArray> a(new DeviceArray);
  a->bytes_ = bytes;
  a->home_ = std::make_unique<Copy>(rt, bytes);
  a->view_ = udf_tensor{reinterpret_cast<void*>(a->home_->ptr), rt->ordinal, host.dtype, host.rows, host.cols, 0};
  const int64_t stride = host.row_stride == 0 ? host.cols : host.row_stride;
  CtxGuard g(rt->ctx);
  if (stride == host.cols || host.rows == 1) {
    CU(cuMemcpyHtoDAsync, a->home_->ptr, host.data, bytes, rt->stream);
  } else {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = host.data;
    copy.srcPitch = size_t(stride) * es;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = a->home_->ptr;
    copy.dstPitch = row_bytes;
    copy.WidthInBytes = row_bytes;
    copy.Height = size_t(host.rows);
    CU(cuMemcpy2DAsync, &copy, rt->stream);
  }
  CU(cuStreamSynchronize, rt->stream);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_ptr[a->home_->ptr] = a;
  return a;
}

DeviceArray::~DeviceArray() {
  if (home_) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_ptr.find(home_->ptr);
    if (it != r.by_ptr.end() && it->second.expired()) r.by_ptr.erase(it);
  }
  copies_.clear();
  home_.reset();
}

CUdeviceptr DeviceArray::on(udf_runtime* rt, CUstream stream) {
  if (rt->ordinal == home_->ordinal) return home_->ptr;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : copies_)
    if (c->ordinal == rt->ordinal) return c->ptr;
  auto c = std::make_unique<Copy>(rt, bytes_);
  CtxGuard g(rt->ctx);
  CU(cuMemcpyPeerAsync, c->ptr, rt->ctx, home_->ptr, home_->ctx, bytes_, stream);
  CU(cuStreamSynchronize, stream);
  copies_.push_back(std::move(c));
  return copies_.back()->ptr;
}

std::shared_ptr<DeviceArray> find_device_array(const void* data, size_t bytes) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_ptr.find(reinterpret_cast<CUdeviceptr>(data));
  if (it == r.by_ptr.end()) return nullptr;
  std::shared_ptr<DeviceArray> a = it->second.lock();
  return a && a->bytes() >= bytes ? a : nullptr;
}

}  // namespace udf::rt
