// udf_tensor: the checks of a caller's tensor, and copies of its rows
// between host and device (host copies on the runtime's copy workers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cuda/buffers.h"
#include "cuda/runtime.h"
#include "udf/artifact/module.h"
#include "udf/runtime.h"

namespace udf::rt {

udf_dtype to_dtype(ElemType e);
size_t elem_size(ElemType e);
std::string dtype_name(udf_dtype t);

/// Checks a tensor's type, shape and memory; returns its row stride in elements.
int64_t check_tensor(udf_runtime* rt, const udf_tensor* t, const char* what, udf_dtype dtype, int64_t cols,
                     int64_t rows = -1);
/// A checked tensor's row stride in elements (what check_tensor returns).
inline int64_t row_stride(const udf_tensor& t) { return t.row_stride == 0 ? t.cols : t.row_stride; }
/// Copies rows [r0, r0 + n) of a (host or device) tensor into contiguous host memory.
void rows_to_host(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst);
/// The runtime's host copy workers (host_pool.h), started on first use.
HostPool& host_pool(udf_runtime* rt);
/// memcpy on the runtime's copy workers and the calling thread, in parts of
/// at least per_part bytes (a copy under two parts runs on the caller
/// alone: copy_is_pooled says which).
constexpr size_t kPooledCopyBytes = size_t(256) << 10;
inline bool copy_is_pooled(size_t bytes, size_t per_part = kPooledCopyBytes) { return bytes >= 2 * per_part; }
void copy_parallel(udf_runtime* rt, std::uint8_t* dst, const std::uint8_t* src, size_t bytes,
                   size_t per_part = kPooledCopyBytes);
/// m rows of `row_bytes`, contiguous at src, to host rows `pitch` bytes
/// apart at dst: one copy_parallel when the rows are contiguous there too.
void host_rows_to(udf_runtime* rt, std::uint8_t* dst, size_t pitch, const std::uint8_t* src, size_t m, size_t row_bytes);
/// Copies rows [r0 + a, r0 + b) of a host tensor to contiguous host rows
/// at dst + a * row bytes (a part of a staged slice).
void host_rows_part(const udf_tensor* t, int64_t stride, int64_t r0, int64_t a, int64_t b, std::uint8_t* dst);
/// Copies rows [r0, r0 + n) of a host tensor into contiguous host memory in
/// slices of slice_rows on the runtime's copy workers and the calling
/// thread, calling ready(first row, rows) (relative to r0) on the calling
/// thread for each slice once it is copied, in order, while the next slices
/// are copied.
void host_rows_in_slices(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst,
                         int64_t slice_rows, const std::function<void(int64_t, int64_t)>& ready);
/// Copies bytes to a device buffer (grown as needed) on `stream`.
void upload(CUstream stream, DevBuf& b, const void* src, size_t bytes, const char* what);

}  // namespace udf::rt
