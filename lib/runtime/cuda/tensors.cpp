#include "cuda/tensors.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "cuda/launch.h"

namespace udf::rt {

udf_dtype to_dtype(ElemType e) {
  switch (e) {
    case ElemType::F32: return UDF_DTYPE_F32;
    case ElemType::F16: return UDF_DTYPE_F16;
    case ElemType::I8: return UDF_DTYPE_I8;
    case ElemType::U8: return UDF_DTYPE_U8;
  }
  return UDF_DTYPE_F32;
}

size_t elem_size(ElemType e) { return udf_dtype_size(to_dtype(e)); }

std::string dtype_name(udf_dtype t) {
  const char* n = udf_dtype_name(t);
  return n ? n : "dtype " + std::to_string(static_cast<int>(t));
}

int64_t check_tensor(udf_runtime* rt, const udf_tensor* t, const char* what, udf_dtype dtype, int64_t cols, int64_t rows) {
  // (The messages are built only on failure: these checks run on every search.)
  const std::string_view w = what;
  require(t != nullptr, [&] { return std::string(w) + " is NULL"; });
  require(t->dtype == dtype,
          [&] { return std::string(w) + " has element type " + dtype_name(t->dtype) + ", expected " + dtype_name(dtype); });
  require(t->rows >= 1, [&] { return std::string(w) + " has " + std::to_string(t->rows) + " rows"; });
  require(t->cols == cols, [&] {
    return std::string(w) + " has " + std::to_string(t->cols) + " columns, expected " + std::to_string(cols) +
           (cols > 1 ? " (the dimension)" : "");
  });
  if (rows >= 0)
    require(t->rows == rows, [&] {
      return std::string(w) + " has " + std::to_string(t->rows) + " rows, expected " + std::to_string(rows);
    });
  const int64_t stride = t->row_stride == 0 ? t->cols : t->row_stride;
  require(stride >= t->cols, [&] { return std::string(w) + ": row_stride " + std::to_string(t->row_stride) + " < cols"; });
  require(t->data != nullptr, [&] { return std::string(w) + ".data is NULL"; });
  if (t->device != UDF_HOST_DEVICE) {
    require(t->device == rt->ordinal, [&] {
      return std::string(w) + " is on device " + std::to_string(t->device) + "; this runtime uses device " +
             std::to_string(rt->ordinal);
    });
    unsigned mem_type = 0;
    CUresult r = cuda().cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              reinterpret_cast<CUdeviceptr>(t->data));
    require(r == CUDA_SUCCESS && (mem_type == CU_MEMORYTYPE_DEVICE || mem_type == CU_MEMORYTYPE_UNIFIED), [&] {
      return std::string(w) + ".data is not CUDA device memory (device = " + std::to_string(t->device) + ")";
    });
  }
  return stride;
}

// The runtime's copy workers (host_pool.h), started by the first copy that
// uses them and kept for the runtime's life: a copy then costs no thread
// start.
HostPool& host_pool(udf_runtime* rt) {
  std::call_once(rt->host_pool_once, [rt] {
    // hardware_concurrency() is a system call: asked once a runtime.
    rt->host_pool = std::make_unique<HostPool>(host_pool_workers(std::thread::hardware_concurrency()));
    // The workers keep spinning a while after each copy, so that the next
    // one (the next search's queries, back to back) finds them awake.
    rt->host_pool->set_linger(std::chrono::microseconds(200));
  });
  return *rt->host_pool;
}

void copy_parallel(udf_runtime* rt, std::uint8_t* dst, const std::uint8_t* src, size_t bytes, size_t per_part) {
  if (!copy_is_pooled(bytes, per_part)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  HostPool& pool = host_pool(rt);
  const size_t parts = std::min<size_t>(pool.width(), bytes / per_part);
  pool.run(parts, [&](size_t i) {
    const size_t b = bytes * i / parts, e = bytes * (i + 1) / parts;
    std::memcpy(dst + b, src + b, e - b);
  });
}

void host_rows_to(udf_runtime* rt, std::uint8_t* dst, size_t pitch, const std::uint8_t* src, size_t m, size_t row_bytes) {
  if (pitch == row_bytes) {
    copy_parallel(rt, dst, src, m * row_bytes);
    return;
  }
  for (size_t r = 0; r < m; ++r) std::memcpy(dst + r * pitch, src + r * row_bytes, row_bytes);
}

void host_rows_part(const udf_tensor* t, int64_t stride, int64_t r0, int64_t a, int64_t b, std::uint8_t* dst) {
  const size_t es = udf_dtype_size(t->dtype);
  const size_t row_bytes = static_cast<size_t>(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + static_cast<size_t>(r0 * stride) * es;
  if (stride == t->cols) {
    std::memcpy(dst + a * row_bytes, base + a * row_bytes, (b - a) * row_bytes);
  } else {
    for (int64_t r = a; r < b; ++r) std::memcpy(dst + r * row_bytes, base + r * stride * es, row_bytes);
  }
}

void host_rows_in_slices(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst,
                         int64_t slice_rows, const std::function<void(int64_t, int64_t)>& ready) {
  const int64_t n_slices = (n + slice_rows - 1) / slice_rows;
  auto start = [&](int64_t i) { return std::min(n, i * slice_rows); };  // slice i: rows [start(i), start(i + 1))
  // Every slice in as many parts as the pool has threads; part i is part
  // i % parts of slice i / parts, so the slices complete about in order, and
  // the calling thread hands each on (ready) as soon as it is complete.
  HostPool& pool = host_pool(rt);
  const size_t parts = pool.width();
  pool.run(
      static_cast<size_t>(n_slices) * parts,
      [&](size_t i) {
        const int64_t slice = static_cast<int64_t>(i / parts), part = static_cast<int64_t>(i % parts);
        const int64_t s0 = start(slice), sn = start(slice + 1) - s0;
        host_rows_part(t, stride, r0, s0 + sn * part / int64_t(parts), s0 + sn * (part + 1) / int64_t(parts), dst);
      },
      parts,
      [&](size_t slice) {
        const int64_t s0 = start(static_cast<int64_t>(slice));
        ready(s0, start(static_cast<int64_t>(slice) + 1) - s0);
      });
}

void rows_to_host(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst) {
  const size_t es = udf_dtype_size(t->dtype);
  const size_t row_bytes = static_cast<size_t>(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + static_cast<size_t>(r0 * stride) * es;
  if (t->device == UDF_HOST_DEVICE) {
    if (stride == t->cols) {
      copy_parallel(rt, dst, base, row_bytes * n);
      return;
    }
    for (int64_t r = 0; r < n; ++r) std::memcpy(dst + r * row_bytes, base + r * stride * es, row_bytes);
  } else if (stride == t->cols) {
    CU(cuMemcpyDtoHAsync, dst, reinterpret_cast<CUdeviceptr>(base), row_bytes * n, rt->stream);
    sync(rt);
  } else {
    for (int64_t r = 0; r < n; ++r)
      CU(cuMemcpyDtoHAsync, dst + r * row_bytes, reinterpret_cast<CUdeviceptr>(base + r * stride * es), row_bytes,
         rt->stream);
    sync(rt);
  }
}

void upload(CUstream stream, DevBuf& b, const void* src, size_t bytes, const char* what) {
  b.ensure(bytes, what);
  if (bytes) CU(cuMemcpyHtoDAsync, b.get(), src, bytes, stream);
}

}  // namespace udf::rt
