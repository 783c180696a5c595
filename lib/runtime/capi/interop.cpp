// DLPack and Arrow C Device interop for the runtime (include/udf/runtime_interop.h).
//
// Every entry point that receives a producer's object releases it exactly
// once: through the handle on success, before returning on failure.  The
// driver calls here (device buffers for exported results, waiting on Arrow
// sync events) go through a small dlopen table of libcuda.so.1 of our own, so
// the conversions need no driver at all for host and fake-device tensors.
#include "udf/runtime_interop.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "capi/api_guard.h"
#include "capi/interop_internal.h"

namespace udf_interop {

udf_status fail(udf_status s, const std::string& m) {
  udf::rt::set_last_error(m);
  return s;
}

// ------------------------------------------------------------- driver table

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      d.why = std::string("no CUDA driver: cannot load libcuda.so.1 (") + dlerror() + ")";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && d.why.empty()) d.why = std::string("no CUDA driver: libcuda.so.1 lacks ") + name;
    };
    sym(d.cuInit, "cuInit");
    sym(d.cuDeviceGet, "cuDeviceGet");
    sym(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    sym(d.cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    sym(d.cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    sym(d.cuMemAlloc, "cuMemAlloc_v2");
    sym(d.cuMemFree, "cuMemFree_v2");
    sym(d.cuEventSynchronize, "cuEventSynchronize");
    if (!d.why.empty()) return;
    if (CUresult r = d.cuInit(0); r != 0) {
      d.why = "no CUDA driver: cuInit failed with CUresult " + std::to_string(r);
      return;
    }
    d.ok = true;
  });
  return d;
}

udf_status device_alloc(int device, size_t bytes, DeviceBuffer& out) {
  const Driver& d = driver();
  if (!d.ok) return fail(UDF_ERROR_NO_DRIVER, d.why);
  CUdevice dev = 0;
  if (d.cuDeviceGet(&dev, device) != 0) return fail(UDF_ERROR_NO_DEVICE, "no CUDA device " + std::to_string(device));
  CUcontext ctx = nullptr;
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&ctx, dev); r != 0)
    return fail(UDF_ERROR_CUDA, "cuDevicePrimaryCtxRetain failed with CUresult " + std::to_string(r));
  d.cuCtxPushCurrent(ctx);
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, bytes ? bytes : 1);
  CUcontext dummy;
  d.cuCtxPopCurrent(&dummy);
  if (r != 0) {
    d.cuDevicePrimaryCtxRelease(dev);
    return fail(r == 2 ? UDF_ERROR_OUT_OF_MEMORY : UDF_ERROR_CUDA,
                "cuMemAlloc of " + std::to_string(bytes) + " bytes failed with CUresult " + std::to_string(r));
  }
  out = DeviceBuffer{dev, ctx, p};
  return UDF_OK;
}

void device_free(const DeviceBuffer& b) {
  const Driver& d = driver();
  if (!d.ok || !b.ptr) return;
  d.cuCtxPushCurrent(b.ctx);
  d.cuMemFree(b.ptr);
  CUcontext dummy;
  d.cuCtxPopCurrent(&dummy);
  d.cuDevicePrimaryCtxRelease(b.device);
}

// ------------------------------------------------------------- helpers

size_t esize(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: case UDF_DTYPE_I32: return 4;
    case UDF_DTYPE_F16: return 2;
    case UDF_DTYPE_I8: case UDF_DTYPE_U8: return 1;
    case UDF_DTYPE_I64: return 8;
  }
  return 0;
}

bool dl_dtype(DLDataType t, udf_dtype& out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) out = UDF_DTYPE_F32;
  else if (t.code == kDLFloat && t.bits == 16) out = UDF_DTYPE_F16;
  else if (t.code == kDLInt && t.bits == 8) out = UDF_DTYPE_I8;
  else if (t.code == kDLUInt && t.bits == 8) out = UDF_DTYPE_U8;
  else if (t.code == kDLInt && t.bits == 32) out = UDF_DTYPE_I32;
  else if (t.code == kDLInt && t.bits == 64) out = UDF_DTYPE_I64;
  else return false;
  return true;
}

DLDataType to_dl(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: return DLDataType{kDLFloat, 32, 1};
    case UDF_DTYPE_F16: return DLDataType{kDLFloat, 16, 1};
    case UDF_DTYPE_I8: return DLDataType{kDLInt, 8, 1};
    case UDF_DTYPE_U8: return DLDataType{kDLUInt, 8, 1};
    case UDF_DTYPE_I32: return DLDataType{kDLInt, 32, 1};
    case UDF_DTYPE_I64: return DLDataType{kDLInt, 64, 1};
  }
  return DLDataType{kDLFloat, 32, 1};
}

std::string dl_dtype_text(DLDataType t) {
  const char* code = t.code == kDLFloat ? "float" : t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint"
                     : t.code == kDLBfloat ? "bfloat" : "code";
  std::string s = std::string(code) + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

// Fills `view` from a DLTensor; returns UDF_OK or an error (already recorded).
udf_status view_of(const DLTensor& t, udf_tensor& view) {
  udf_tensor v{};
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: v.device = UDF_HOST_DEVICE; break;
    case kDLCUDA:
    case kDLCUDAManaged:
      if (t.device.device_id < 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "DLPack tensor: negative CUDA device_id");
      v.device = t.device.device_id;
      break;
    default:
      return fail(UDF_ERROR_INVALID_ARGUMENT,
                  "DLPack tensor: device type " + std::to_string(static_cast<int>(t.device.device_type)) +
                      " is neither CPU (1), CUDA (2), CUDA host (3) nor CUDA managed (13) memory");
  }
  if (!dl_dtype(t.dtype, v.dtype))
    return fail(UDF_ERROR_INVALID_ARGUMENT, "DLPack tensor: dtype " + dl_dtype_text(t.dtype) +
                                                " is not float32, float16, int8, uint8, int32 or int64");
  if (t.ndim < 0 || t.ndim > 2)
    return fail(UDF_ERROR_INVALID_ARGUMENT,
                "DLPack tensor: ndim " + std::to_string(t.ndim) + " (expected 1 or 2: rows x dim, or a 1-D array)");
  if (t.ndim > 0 && !t.shape) return fail(UDF_ERROR_INVALID_ARGUMENT, "DLPack tensor: shape is NULL");
  int64_t rows = 1, cols = 1, stride = 0;
  if (t.ndim == 1) cols = t.shape[0];
  if (t.ndim == 2) { rows = t.shape[0]; cols = t.shape[1]; }
  if (rows < 0 || cols < 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "DLPack tensor: negative shape");
  stride = cols;
  if (t.strides && t.ndim > 0) {
    // Strides of size-1 axes say nothing (frameworks put anything there).
    int64_t last = t.strides[t.ndim - 1];
    bool unit_last = last == 1 || cols <= 1;
    bool ok = unit_last;
    if (t.ndim == 2 && rows > 1) {
      stride = t.strides[0];
      ok = ok && stride >= cols;
    }
    if (!ok)
      return fail(UDF_ERROR_INVALID_ARGUMENT,
                  "DLPack tensor: non-contiguous strides (" +
                      (t.ndim == 2 ? std::to_string(t.strides[0]) + ", " : std::string()) + std::to_string(last) +
                      ") for shape (" + (t.ndim == 2 ? std::to_string(rows) + ", " : std::string()) +
                      std::to_string(cols) + "): rows must be contiguous; copy with ascontiguousarray");
  }
  if (!t.data && rows * cols > 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "DLPack tensor: data is NULL");
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.rows = rows;
  v.cols = cols;
  v.row_stride = stride == cols ? 0 : stride;
  view = v;
  return UDF_OK;
}

}  // namespace udf_interop

// ------------------------------------------------------------- handles

struct udf_tensor_handle {
  enum Kind { DlPack, DlPackVersioned, Arrow } kind;
  DLManagedTensor* dl = nullptr;
  DLManagedTensorVersioned* dlv = nullptr;
  ArrowArray arrow{};  // moved in
};

extern "C" UDF_API void udf_tensor_handle_release(udf_tensor_handle* h) {
  if (!h) return;
  switch (h->kind) {
    case udf_tensor_handle::DlPack:
      if (h->dl && h->dl->deleter) h->dl->deleter(h->dl);
      break;
    case udf_tensor_handle::DlPackVersioned:
      if (h->dlv && h->dlv->deleter) h->dlv->deleter(h->dlv);
      break;
    case udf_tensor_handle::Arrow:
      if (h->arrow.release) h->arrow.release(&h->arrow);
      break;
  }
  delete h;
}

namespace {

using namespace udf_interop;

// Takes a DLPack tensor, plain or versioned: on every failure its deleter runs
// exactly once; on success the returned handle owns it.  `check` returns an
// empty string when the tensor is acceptable, else the reason.
template <class Managed, class Check, class Wrap>
udf_status adopt_dlpack(Managed* t, udf_tensor* view, udf_tensor_handle** handle, Check check, Wrap wrap) {
  if (handle) *handle = nullptr;
  auto drop = [&] { if (t && t->deleter) t->deleter(t); };
  if (!t) return fail(UDF_ERROR_INVALID_ARGUMENT, "DLPack tensor is NULL");
  if (!view || !handle) {
    drop();
    return fail(UDF_ERROR_INVALID_ARGUMENT, "view and handle must not be NULL");
  }
  if (std::string why = check(*t); !why.empty()) {
    drop();
    return fail(UDF_ERROR_INVALID_ARGUMENT, why);
  }
  udf_tensor v{};
  if (udf_status s = view_of(t->dl_tensor, v); s != UDF_OK) {
    drop();
    return s;
  }
  auto* h = new (std::nothrow) udf_tensor_handle(wrap(t));
  if (!h) {
    drop();
    return fail(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  }
  *view = v;
  *handle = h;
  return UDF_OK;
}

}  // namespace

extern "C" UDF_API udf_status udf_tensor_from_dlpack(DLManagedTensor* t, udf_tensor* view, udf_tensor_handle** handle) {
  return adopt_dlpack(
      t, view, handle, [](const DLManagedTensor&) { return std::string(); },
      [](DLManagedTensor* m) { return udf_tensor_handle{udf_tensor_handle::DlPack, m, nullptr, {}}; });
}

extern "C" UDF_API udf_status udf_tensor_from_dlpack_versioned(DLManagedTensorVersioned* t, int32_t for_writing,
                                                               udf_tensor* view, udf_tensor_handle** handle) {
  auto check = [&](const DLManagedTensorVersioned& m) -> std::string {
    if (m.version.major != 1)
      return "DLPack tensor: version " + std::to_string(m.version.major) + "." + std::to_string(m.version.minor) +
             " is not supported (expected 1.x)";
    if (for_writing && (m.flags & DLPACK_FLAG_BITMASK_READ_ONLY))
      return "DLPack tensor is read-only but the runtime would write it";
    return {};
  };
  return adopt_dlpack(t, view, handle, check, [](DLManagedTensorVersioned* m) {
    return udf_tensor_handle{udf_tensor_handle::DlPackVersioned, nullptr, m, {}};
  });
}

namespace udf_interop {

bool arrow_prim(const char* f, udf_dtype& out) {
  if (!f || !f[0] || f[1]) return false;
  switch (f[0]) {
    case 'f': out = UDF_DTYPE_F32; return true;
    case 'e': out = UDF_DTYPE_F16; return true;
    case 'c': out = UDF_DTYPE_I8; return true;
    case 'C': out = UDF_DTYPE_U8; return true;
    case 'i': out = UDF_DTYPE_I32; return true;
    case 'l': out = UDF_DTYPE_I64; return true;
  }
  return false;
}

const char* arrow_format(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: return "f";
    case UDF_DTYPE_F16: return "e";
    case UDF_DTYPE_I8: return "c";
    case UDF_DTYPE_U8: return "C";
    case UDF_DTYPE_I32: return "i";
    case UDF_DTYPE_I64: return "l";
  }
  return "f";
}

udf_status arrow_view(const ArrowDeviceArray& a, const ArrowSchema& s, udf_tensor& view) {
  udf_tensor v{};
  switch (a.device_type) {
    case ARROW_DEVICE_CPU:
    case ARROW_DEVICE_CUDA_HOST: v.device = UDF_HOST_DEVICE; break;
    case ARROW_DEVICE_CUDA:
    case ARROW_DEVICE_CUDA_MANAGED:
      if (a.device_id < 0 || a.device_id > INT32_MAX) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: bad CUDA device_id");
      v.device = static_cast<int32_t>(a.device_id);
      break;
    default:
      return fail(UDF_ERROR_INVALID_ARGUMENT,
                  "Arrow array: device type " + std::to_string(a.device_type) +
                      " is neither CPU (1), CUDA (2), CUDA host (3) nor CUDA managed (13) memory");
  }
  if (!s.format) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow schema: format is NULL");
  const ArrowArray& arr = a.array;
  if (arr.length < 0 || arr.offset < 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: negative length or offset");
  if (arr.null_count != 0 && !(arr.null_count == -1 && (arr.n_buffers < 1 || !arr.buffers || !arr.buffers[0])))
    return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: has nulls (vectors must all be present)");
  std::string fmt = s.format;
  if (fmt.rfind("+w:", 0) == 0) {
    char* end = nullptr;
    long long dim = std::strtoll(fmt.c_str() + 3, &end, 10);
    if (!end || *end || dim <= 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow schema: bad fixed-size list format '" + fmt + "'");
    if (s.n_children != 1 || !s.children || !s.children[0])
      return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow schema: fixed-size list without its child");
    const ArrowSchema& cs = *s.children[0];
    if (!arrow_prim(cs.format, v.dtype) || v.dtype == UDF_DTYPE_I32 || v.dtype == UDF_DTYPE_I64)
      return fail(UDF_ERROR_INVALID_ARGUMENT, std::string("Arrow schema: list of '") + (cs.format ? cs.format : "(null)") +
                                                  "' (expected f float32, e float16, c int8 or C uint8)");
    if (arr.n_children != 1 || !arr.children || !arr.children[0])
      return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: fixed-size list without its child array");
    const ArrowArray& c = *arr.children[0];
    if (c.null_count != 0 && !(c.null_count == -1 && (c.n_buffers < 2 || !c.buffers || !c.buffers[0])))
      return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: the values have nulls");
    if (c.n_buffers != 2 || !c.buffers) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: the values array must have 2 buffers");
    if (c.length < (arr.offset + arr.length) * dim)
      return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: values shorter than length x list size");
    if (!c.buffers[1] && arr.length > 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: values buffer is NULL");
    v.data = static_cast<char*>(const_cast<void*>(c.buffers[1])) + (c.offset + arr.offset * dim) * esize(v.dtype);
    v.rows = arr.length;
    v.cols = dim;
  } else if (arrow_prim(s.format, v.dtype)) {
    if (arr.n_buffers != 2 || !arr.buffers) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: a primitive array must have 2 buffers");
    if (!arr.buffers[1] && arr.length > 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow array: values buffer is NULL");
    v.data = static_cast<char*>(const_cast<void*>(arr.buffers[1])) + arr.offset * esize(v.dtype);
    v.rows = 1;
    v.cols = arr.length;
  } else {
    return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow schema: format '" + fmt +
                                                "' (expected +w:DIM of f/e/c/C, or a primitive f e c C i l array)");
  }
  if (a.sync_event && v.device != UDF_HOST_DEVICE) {
    const Driver& d = driver();
    if (!d.ok) return fail(UDF_ERROR_NO_DRIVER, d.why);
    if (CUresult r = d.cuEventSynchronize(*static_cast<CUevent*>(a.sync_event)); r != 0)
      return fail(UDF_ERROR_CUDA, "cuEventSynchronize on the Arrow sync_event failed with CUresult " + std::to_string(r));
  }
  view = v;
  return UDF_OK;
}

}  // namespace udf_interop

using namespace udf_interop;

extern "C" UDF_API udf_status udf_tensor_from_arrow_device(ArrowDeviceArray* a, const ArrowSchema* s, udf_tensor* view,
                                                           udf_tensor_handle** handle) {
  if (handle) *handle = nullptr;
  if (!a) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow device array is NULL");
  if (!a->array.release) return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow device array is already released");
  // Move the array out of the caller's struct first: from here on we own it.
  ArrowArray moved = a->array;
  a->array.release = nullptr;
  auto drop = [&] { moved.release(&moved); };
  if (!s || !view || !handle) {
    drop();
    return fail(UDF_ERROR_INVALID_ARGUMENT, "schema, view and handle must not be NULL");
  }
  if (!s->release) {
    drop();
    return fail(UDF_ERROR_INVALID_ARGUMENT, "Arrow schema is released");
  }
  ArrowDeviceArray copy = *a;
  copy.array = moved;
  udf_tensor v{};
  if (udf_status st = arrow_view(copy, *s, v); st != UDF_OK) {
    drop();
    return st;
  }
  auto* h = new (std::nothrow) udf_tensor_handle{udf_tensor_handle::Arrow, nullptr, nullptr, moved};
  if (!h) {
    drop();
    return fail(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  }
  *view = v;
  *handle = h;
  return UDF_OK;
}

