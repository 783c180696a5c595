// What the index's build and search share: tensor checks and copies, and the
// runtime's own index kernels (conversion, the coarse probe).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "index.h"

namespace udf::rt {

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

// memcpy on up to 4 threads for a few MB and more (one thread copies at
// about 6.5 GB/s on the H100 machine's host, four at 13.5 GB/s: 5 MB of
// queries, 0.8 -> 0.4 ms); one thread when no other can be started.
void copy_parallel(std::uint8_t* dst, const std::uint8_t* src, size_t bytes, size_t per_thread) {
  // hardware_concurrency() is a system call: asked once, and only for copies that could use it.
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = bytes < 2 * per_thread ? 1 : std::min<size_t>({4, bytes / per_thread, cores});
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto part = [&](size_t i) {
    const size_t b = bytes * i / threads, e = bytes * (i + 1) / threads;
    std::memcpy(dst + b, src + b, e - b);
  };
  std::vector<std::thread> pool;
  size_t started = 1;
  try {
    for (; started < threads; ++started) pool.emplace_back(part, started);
  } catch (const std::system_error&) {
  }
  part(0);
  for (size_t i = started; i < threads; ++i) part(i);
  for (std::thread& th : pool) th.join();
}

void host_rows_in_slices(const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst, int64_t slice_rows,
                         const std::function<void(int64_t, int64_t)>& ready) {
  const size_t es = udf_dtype_size(t->dtype);
  const size_t row_bytes = static_cast<size_t>(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + static_cast<size_t>(r0 * stride) * es;
  const int64_t n_slices = (n + slice_rows - 1) / slice_rows;
  // Each of `threads` workers copies its share of every slice in order and
  // counts the slice done; the calling thread copies its share too, then
  // waits for the slice's count and hands it on.
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(4, cores);
  std::vector<std::atomic<uint32_t>> done(static_cast<size_t>(n_slices));
  for (auto& d : done) d.store(0, std::memory_order_relaxed);
  auto copy_part = [&](int64_t slice, size_t part, size_t parts) {
    const int64_t s0 = slice * slice_rows, sn = std::min(slice_rows, n - s0);
    const int64_t a = s0 + sn * int64_t(part) / int64_t(parts), b = s0 + sn * int64_t(part + 1) / int64_t(parts);
    if (stride == t->cols) {
      std::memcpy(dst + a * row_bytes, base + a * row_bytes, (b - a) * row_bytes);
    } else {
      for (int64_t r = a; r < b; ++r) std::memcpy(dst + r * row_bytes, base + r * stride * es, row_bytes);
    }
    done[static_cast<size_t>(slice)].fetch_add(1, std::memory_order_release);
  };
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  size_t parts = 1;
  try {
    for (; parts < threads; ++parts)
      pool.emplace_back([&, part = parts] {
        for (int64_t i = 0; i < n_slices && !stop.load(std::memory_order_relaxed); ++i) copy_part(i, part, threads);
      });
  } catch (const std::system_error&) {  // fewer threads: the calling thread copies the rest
  }
  const size_t started = parts;
  try {
    for (int64_t i = 0; i < n_slices; ++i) {
      copy_part(i, 0, threads);
      for (size_t p = started; p < threads; ++p) copy_part(i, p, threads);
      while (done[static_cast<size_t>(i)].load(std::memory_order_acquire) < threads) std::this_thread::yield();
      const int64_t s0 = i * slice_rows;
      ready(s0, std::min(slice_rows, n - s0));
    }
  } catch (...) {
    stop = true;
    for (std::thread& th : pool) th.join();
    throw;
  }
  for (std::thread& th : pool) th.join();
}

void rows_to_host(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst) {
  const size_t es = udf_dtype_size(t->dtype);
  const size_t row_bytes = static_cast<size_t>(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + static_cast<size_t>(r0 * stride) * es;
  if (t->device == UDF_HOST_DEVICE) {
    if (stride == t->cols) {
      copy_parallel(dst, base, row_bytes * n);
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

void convert(udf_runtime* rt, CUstream stream, CUdeviceptr src, uint32_t src_elem, uint64_t src_stride, CUdeviceptr dst,
             uint32_t dst_elem, uint32_t rows, uint32_t dim, bool normalize) {
  udf_ivf_convert_args_v1 a{reinterpret_cast<const void*>(src), reinterpret_cast<void*>(dst), src_stride, dim, rows, dim,
                            src_elem, dst_elem, normalize ? 1u : 0u, 0};
  launch_on(stream, rt->f_convert, rows, 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
}

namespace {

uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

void nearest_centroids(udf_runtime* rt, CUstream stream, CUdeviceptr rows, uint32_t row_elem, uint64_t row_stride,
                       uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim, uint32_t metric,
                       uint32_t n_out, CUdeviceptr out_lists, CUdeviceptr out_dists, DevBuf& keys,
                       const DirectSchedule* direct, const std::uint8_t* inline_rows) {
  const uint32_t sort = pow2_at_least(n_lists);
  const size_t smem = UDF_IVF_SELECT_V1_SMEM_BYTES(sort);
  prepare_smem(rt, direct ? rt->f_select_direct : rt->f_select, smem,
               [&] { return "the coarse probe over " + std::to_string(n_lists) + " lists"; });
  // Rows per pass: the keys stay under 256 MB; grid.y (row tiles) <= 65535.
  constexpr uint32_t R = UDF_IVF_COARSE_V1_ROWS, C = UDF_IVF_COARSE_V1_CENTROIDS;
  constexpr uint32_t FR = UDF_IVF_COARSE_FEW_V1_ROWS, FC = UDF_IVF_COARSE_FEW_V1_CENTROIDS, kFewRows = 256;
  const uint64_t fit = std::max<uint64_t>(R, (uint64_t(64) << 20) / n_lists / R * R);
  const uint32_t per_pass = static_cast<uint32_t>(std::min<uint64_t>({fit, uint64_t(65535) * R, n_rows}));
  if (direct && per_pass < n_rows) fail(UDF_ERROR_INTERNAL, "a direct schedule needs the coarse probe in one pass");
  keys.ensure(size_t(per_pass) * n_lists * 4, "coarse distances");
  const size_t es = udf_dtype_size(static_cast<udf_dtype>(row_elem));
  for (uint32_t r0 = 0; r0 < n_rows; r0 += per_pass) {
    const uint32_t m = std::min(per_pass, n_rows - r0);
    udf_ivf_coarse_keys_args_v1 k{reinterpret_cast<const void*>(rows + r0 * row_stride * es),
                                  reinterpret_cast<const float*>(centroids), keys.as<float>(), row_stride, m, dim, n_lists,
                                  metric, row_elem, 0};
    const size_t row_bytes = size_t(row_stride) * es;
    if (inline_rows && m == n_rows && n_rows * row_bytes <= UDF_IVF_COARSE_INLINE_V1_BYTES) {
      // The rows ride in the launch (ivf_index_v1.h): no upload before it;
      // the kernel stores them at `rows` for the kernels after it.
      udf_ivf_coarse_inline_args_v1 ia{};
      ia.k = k;
      ia.k.rows = nullptr;
      ia.rows_out = reinterpret_cast<uint32_t*>(rows);
      ia.n_words = static_cast<uint32_t>((n_rows * row_bytes + 3) / 4);
      std::memcpy(ia.words, inline_rows, n_rows * row_bytes);
      launch_on(stream, rt->f_coarse_keys_inline, (n_lists + FC - 1) / FC, (m + FR - 1) / FR, UDF_IVF_INDEX_V1_THREADS,
                0, &ia);
    } else if (m <= kFewRows) {  // small search batches: more, smaller blocks, the same keys
      launch_on(stream, rt->f_coarse_keys_few, (n_lists + FC - 1) / FC, (m + FR - 1) / FR, UDF_IVF_INDEX_V1_THREADS, 0, &k);
    } else {
      launch_on(stream, rt->f_coarse_keys, (n_lists + C - 1) / C, (m + R - 1) / R, UDF_IVF_INDEX_V1_THREADS, 0, &k);
    }
    udf_ivf_select_args_v1 s{keys.as<const float>(), reinterpret_cast<uint32_t*>(out_lists) + size_t(r0) * n_out,
                             out_dists ? reinterpret_cast<float*>(out_dists) + size_t(r0) * n_out : nullptr,
                             m, n_lists, n_out, metric, sort, 1, 1, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    if (direct) {
      s.tiles = direct->tiles;
      s.tile_groups = direct->tile_groups;
      s.list_sizes = direct->list_sizes;
      s.sched_items = direct->items;
      s.sched_pairs = direct->pairs;
      s.query_rows = direct->query_rows;
      s.query_stats = direct->query_stats;
      s.row_ranges = direct->row_ranges;
    }
    if (direct)
      launch_on(stream, rt->f_select_direct, m, 1, UDF_IVF_SELECT_DIRECT_V1_THREADS, smem, &s);
    else
      launch_on(stream, rt->f_select, m, 1, UDF_IVF_INDEX_V1_THREADS, smem, &s);
  }
}

}  // namespace udf::rt
