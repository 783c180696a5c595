#include "index/coarse.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/launch.h"
#include "cuda/tensors.h"
#include "index/schedule_plan.h"
#include "index/testing_paths.h"
#include "udf/kernels/ivf_index_v1.h"

namespace udf::rt {

void convert(udf_runtime* rt, CUstream stream, CUdeviceptr src, uint32_t src_elem, uint64_t src_stride, CUdeviceptr dst,
             uint32_t dst_elem, uint32_t rows, uint32_t dim, bool normalize, CUdeviceptr src_rows, CUdeviceptr scale) {
  udf_ivf_convert_args_v1 a{reinterpret_cast<const void*>(src), reinterpret_cast<void*>(dst),
                            reinterpret_cast<const uint64_t*>(src_rows), src_stride, dim, rows, dim,
                            src_elem, dst_elem, normalize ? 1u : 0u, 0, reinterpret_cast<const float*>(scale)};
  launch_on(stream, rt->kernels[IndexKernel::convert], rows, 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
}

void nearest_lists(udf_runtime* rt, CUstream stream, CUdeviceptr rows, uint32_t row_elem, uint64_t row_stride,
                   uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim, uint32_t metric, uint32_t n_out,
                   CUdeviceptr out_lists, CUdeviceptr out_dists, CUdeviceptr centroid_norms) {
  if (n_out < 1 || n_out > UDF_IVF_NEAREST_V1_MAX_OUT || n_out > n_lists)
    fail(UDF_ERROR_INTERNAL, "nearest_lists: n_out " + std::to_string(n_out) + " is not in 1 .. min(" +
                                 std::to_string(UDF_IVF_NEAREST_V1_MAX_OUT) + ", n_lists)");
  if (n_rows == 0) return;
  if (testing_path(kTestingKeysAssign) && centroid_norms == 0) {
    DevBuf keys;
    nearest_centroids(rt, stream, rows, row_elem, row_stride, n_rows, centroids, n_lists, dim, metric, n_out, out_lists,
                      out_dists, keys);
    CU(cuStreamSynchronize, stream);  // before `keys` goes
    return;
  }
  udf_ivf_nearest_args_v1 a{};
  a.k = udf_ivf_coarse_keys_args_v1{reinterpret_cast<const void*>(rows), reinterpret_cast<const float*>(centroids), nullptr,
                                    row_stride, n_rows, dim, n_lists, metric, row_elem, 0};
  a.out_lists = reinterpret_cast<uint32_t*>(out_lists);
  a.out_dists = reinterpret_cast<float*>(out_dists);
  a.n_out = n_out;
  a.centroid_norms = reinterpret_cast<const float*>(centroid_norms);
  a.expanded = centroid_norms != 0 && metric == UDF_IVF_INDEX_V1_L2 ? 1u : 0u;
  const NearestKernel k = nearest_kernel(n_lists);
  launch_on(stream, rt->kernels[k.kernel], (n_rows + k.rows - 1) / k.rows, 1, k.threads, 0, &a);
}

NearestKernel nearest_kernel(uint32_t n_lists) {
  // The wide kernel's tile holds two of the narrow one's: past one narrow
  // tile it does the same work with fewer shared loads a key.
  if (n_lists > UDF_IVF_COARSE_V1_CENTROIDS && !testing_path(kTestingNarrowNearest))
    return {IndexKernel::nearest_wide, UDF_IVF_NEAREST_WIDE_V1_ROWS, UDF_IVF_NEAREST_WIDE_V1_THREADS};
  return {IndexKernel::nearest, UDF_IVF_NEAREST_V1_ROWS, UDF_IVF_INDEX_V1_THREADS};
}

int64_t nearest_chunk(udf_runtime* rt, int64_t rows, uint32_t n_lists) {
  const NearestKernel k = nearest_kernel(n_lists);
  int blocks = 0;
  CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, rt->kernels[k.kernel], static_cast<int>(k.threads), 0);
  const int64_t wave = int64_t(k.rows) * std::max(blocks, 1) * std::max(rt->info.sm_count, 1);
  return rows >= wave ? rows / wave * wave : rows;
}

void upload_centroid_norms(CUstream stream, const float* centroids, uint32_t n, uint32_t dim, DevBuf& norms) {
  std::vector<float> h(n);
  for (uint32_t l = 0; l < n; ++l) {
    double s = 0;
    for (uint32_t d = 0; d < dim; ++d) s += double(centroids[size_t(l) * dim + d]) * centroids[size_t(l) * dim + d];
    h[l] = static_cast<float>(s);
  }
  upload(stream, norms, h.data(), h.size() * 4, "centroid norms");
  CU(cuStreamSynchronize, stream);  // before `h` goes
}

namespace {

uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

// A pass's selection kernel, its block and its dynamic shared memory: the
// direct kernel for a direct schedule, else the batch's (schedule_plan.h,
// select_kernel).
struct SelectLaunch {
  IndexKernel kernel;
  unsigned threads;
  size_t smem;
};
SelectLaunch select_launch(bool direct, SelectKernel kind, uint32_t sort) {
  if (direct) return {IndexKernel::select_direct, UDF_IVF_SELECT_DIRECT_V1_THREADS, UDF_IVF_SELECT_V1_SMEM_BYTES(sort)};
  switch (kind) {
    case SelectKernel::gather:
      return {IndexKernel::select_gather, UDF_IVF_INDEX_V1_THREADS, UDF_IVF_SELECT_V1_GATHER_SMEM_BYTES};
    case SelectKernel::wide:
      return {IndexKernel::select_wide, UDF_IVF_SELECT_DIRECT_V1_THREADS, 0};
    case SelectKernel::plain:
      break;
  }
  return {IndexKernel::select, UDF_IVF_INDEX_V1_THREADS, UDF_IVF_SELECT_V1_SMEM_BYTES(sort)};
}

}  // namespace

void nearest_centroids(udf_runtime* rt, CUstream stream, CUdeviceptr rows, uint32_t row_elem, uint64_t row_stride,
                       uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim, uint32_t metric,
                       uint32_t n_out, CUdeviceptr out_lists, CUdeviceptr out_dists, DevBuf& keys,
                       const DirectSchedule* direct, const std::uint8_t* inline_rows) {
  const uint32_t sort = pow2_at_least(n_lists);
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
      launch_on(stream, rt->kernels[IndexKernel::coarse_keys_inline], (n_lists + FC - 1) / FC, (m + FR - 1) / FR,
                UDF_IVF_INDEX_V1_THREADS, 0, &ia);
    } else if (m <= kFewRows) {  // small search batches: more, smaller blocks, the same keys
      launch_on(stream, rt->kernels[IndexKernel::coarse_keys_few], (n_lists + FC - 1) / FC, (m + FR - 1) / FR,
                UDF_IVF_INDEX_V1_THREADS, 0, &k);
    } else {
      launch_on(stream, rt->kernels[IndexKernel::coarse_keys], (n_lists + C - 1) / C, (m + R - 1) / R,
                UDF_IVF_INDEX_V1_THREADS, 0, &k);
    }
    udf_ivf_select_args_v1 s{keys.as<const float>(), reinterpret_cast<uint32_t*>(out_lists) + size_t(r0) * n_out,
                             out_dists ? reinterpret_cast<float*>(out_dists) + size_t(r0) * n_out : nullptr,
                             m, n_lists, n_out, metric, sort, 1, 1, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    const SelectLaunch sl = select_launch(
        direct != nullptr,
        testing_path(kTestingPlainSelect) ? SelectKernel::plain : select_kernel(rt->info.sm_count, m, n_lists, n_out), sort);
    const CUfunction select = rt->kernels[sl.kernel];
    prepare_smem(rt, select, sl.smem, [&] { return "the coarse probe over " + std::to_string(n_lists) + " lists"; });
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
    launch_on(stream, select, m, 1, sl.threads, sl.smem, &s);
  }
}

}  // namespace udf::rt
