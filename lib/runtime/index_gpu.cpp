// What the index's build and search share: tensor checks and copies, and the
// runtime's own index kernels (conversion, the coarse probe).
#include <algorithm>
#include <cstring>
#include <string_view>
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

// HOST POOL (host_pool.h): the runtime's copy workers, started by the first
// copy that uses them.  One thread copies at 8-12 GB/s on the H100
// machine's host; threads started for a copy cost more than they saved
// (5 MB of queries on 4 started threads 0.16 ms, on 8 kept ones 0.035 ms
// back to back and 0.1-0.2 ms after a batch-10k scan's idle time).
HostPool& host_pool(udf_runtime* rt) {
  std::call_once(rt->host_pool_once, [rt] {
    // hardware_concurrency() is a system call: asked once a runtime.
    rt->host_pool = std::make_unique<HostPool>(host_pool_workers(std::thread::hardware_concurrency()));
    // AWAKE: the workers stay awake 0.2 ms after each copy, so that the
    // next one (the next search's queries, back to back) finds them so
    // (batch 10k on the H100 machine: 0.01-0.04 ms a search).
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

void host_rows_in_slices(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst,
                         int64_t slice_rows, const std::function<void(int64_t, int64_t)>& ready) {
  const size_t es = udf_dtype_size(t->dtype);
  const size_t row_bytes = static_cast<size_t>(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + static_cast<size_t>(r0 * stride) * es;
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
        const int64_t a = s0 + sn * part / int64_t(parts), b = s0 + sn * (part + 1) / int64_t(parts);
        if (stride == t->cols) {
          std::memcpy(dst + a * row_bytes, base + a * row_bytes, (b - a) * row_bytes);
        } else {
          for (int64_t r = a; r < b; ++r) std::memcpy(dst + r * row_bytes, base + r * stride * es, row_bytes);
        }
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
