// The runtime's coarse probe and element conversion (its own kernels,
// include/udf/kernels/ivf_index_v1.h): used by the build's assignment and
// k-means and by the search's first stage.
#pragma once

#include <cstdint>

#include "cuda/buffers.h"
#include "cuda/runtime.h"

namespace udf::rt {

/// dst[r] = src[src_rows ? src_rows[r] : r] converted to f32 (dst_elem 0)
/// or f16 (1), optionally normalized, then multiplied element by element by
/// `scale` (dim f32 on the device, or 0); src_rows: device row numbers, or 0.
void convert(udf_runtime* rt, CUstream stream, CUdeviceptr src, uint32_t src_elem, uint64_t src_stride, CUdeviceptr dst,
             uint32_t dst_elem, uint32_t rows, uint32_t dim, bool normalize, CUdeviceptr src_rows = 0,
             CUdeviceptr scale = 0);

/// The build's coarse assignment: for each of n_rows rows, the n_out (1 ..
/// UDF_IVF_NEAREST_V1_MAX_OUT) nearest of n_lists centroids, as
/// nearest_centroids gives them (the same lists and distances, bit for bit)
/// in one kernel, without its keys.  With centroid_norms (their squared
/// norms, L2 only): L2 expanded as |x|^2 + |c|^2 - 2 x.c, half the
/// arithmetic, for k-means and the build's assignment (not the coarse
/// probe's bits: a row's distance is exact to about 1e-7 of |x|^2 + |c|^2).
void nearest_lists(udf_runtime* rt, CUstream stream, CUdeviceptr rows, uint32_t row_elem, uint64_t row_stride,
                   uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim, uint32_t metric, uint32_t n_out,
                   CUdeviceptr out_lists, CUdeviceptr out_dists, CUdeviceptr centroid_norms = 0);

/// The kernel nearest_lists launches for n_lists lists (the 64-centroid
/// `nearest` for one tile of them, else `nearest_wide`), its rows a block
/// and threads.
struct NearestKernel {
  IndexKernel kernel;
  uint32_t rows, threads;
};
NearestKernel nearest_kernel(uint32_t n_lists);

/// `rows` rounded down to whole waves of nearest_lists' kernel for n_lists
/// lists on rt's device (a launch of that many rows leaves no SM idle before
/// its last blocks), when it holds one.
int64_t nearest_chunk(udf_runtime* rt, int64_t rows, uint32_t n_lists);

/// The squared norms of n f32 centroids of `dim` (each summed in double)
/// into `norms` on the device (grown as needed), for nearest_lists.
void upload_centroid_norms(CUstream stream, const float* centroids, uint32_t n, uint32_t dim, DevBuf& norms);

/// The coarse probe: for each of n_rows rows (elements of row_elem, row_stride
/// apart), the n_out nearest of n_lists f32 centroids under `metric`
/// (UDF_IVF_INDEX_V1_L2 / _IP), nearest first, ties to the smaller list;
/// their distances too when out_dists is not 0.  `keys` is scratch
/// (n_rows x n_lists floats, grown as needed; keep n_rows * n_lists bounded).
/// With `direct`, the selection also writes a tiny search batch's
/// query-major schedule (udf_ivf_select_args_v1, the direct schedule); the
/// rows must then fit one pass.  `inline_rows` (host memory, the rows as
/// `rows` will hold them, or null): when they fit a launch's parameters
/// (UDF_IVF_COARSE_INLINE_V1_BYTES) the coarse kernel takes them from there
/// and stores them at `rows` itself, so `rows` need not be uploaded first.
struct DirectSchedule {
  uint32_t tiles = 1;        // tiles per probe
  uint32_t tile_groups = 1;  // groups of 32 slots per tile
  const uint32_t* list_sizes = nullptr;
  void* items = nullptr;
  void* pairs = nullptr;
  uint32_t* query_rows = nullptr;
  uint32_t* query_stats = nullptr;
  uint32_t* row_ranges = nullptr;  // set: the tail merge's layout
};
void nearest_centroids(udf_runtime* rt, CUstream stream, CUdeviceptr rows, uint32_t row_elem, uint64_t row_stride,
                       uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim, uint32_t metric,
                       uint32_t n_out, CUdeviceptr out_lists, CUdeviceptr out_dists, DevBuf& keys,
                       const DirectSchedule* direct = nullptr, const std::uint8_t* inline_rows = nullptr);

}  // namespace udf::rt
