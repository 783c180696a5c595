// IVF index kernels v1 (see include/udf/kernels/ivf_index_v1.h), built with
// nvcc into one fatbin embedded in libudf_runtime.so.  One file per stage
// of include/udf/kernels/ivf_index_v1_kernels.def, included here in the
// table's order:
//   convert   element conversion and normalization
//   kmeans    the k-means accumulation
//   coarse    the coarse probe / k-means assignment: a tiled distance kernel,
//             then a per-row selection (and a tiny batch's direct schedule)
//   nearest   the build's nearest lists (k-means, the assignment) in one pass
//   schedule  the search schedule built on the GPU
//   lists     the list layout: rows to slots and back, lists moved
//   rows      the lists of exact search and refine (slot -> row tables,
//             probes, candidates)
//   shards    the shards' merge and result keys back to ids
#include <cuda_fp16.h>

#include <udf/kernels/ivf_flat_v1.h>
#include <udf/kernels/ivf_index_v1.h>

#include "block_sort.cuh"
#include "shard_merge.cuh"
#include "warp_topk.cuh"

#include "ivf_index_v1/common.cuh"
#include "ivf_index_v1/convert.cuh"
#include "ivf_index_v1/kmeans.cuh"
#include "ivf_index_v1/coarse.cuh"
#include "ivf_index_v1/nearest.cuh"
#include "ivf_index_v1/schedule.cuh"
#include "ivf_index_v1/lists.cuh"
#include "ivf_index_v1/rows.cuh"
#include "ivf_index_v1/shards.cuh"

// Every kernel of the table is defined above: the runtime takes its function
// handles from the same table.  Unevaluated: no code.
#define UDF_IVF_INDEX_KERNEL(stage, name) \
  static_assert(sizeof(&udf_ivf_index_v1_##name) != 0, "stage " #stage ": kernel udf_ivf_index_v1_" #name " is missing");
#include <udf/kernels/ivf_index_v1_kernels.def>
#undef UDF_IVF_INDEX_KERNEL
