// Stage kmeans: the centroids' sums, list by list (k-means' update).
#pragma once
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_accumulate(udf_ivf_accumulate_args_v1 a) {
  const uint32_t l = blockIdx.x;
  if (l >= a.n_lists) return;
  const uint32_t b = a.starts[l], e = a.starts[l + 1];
  for (uint32_t d = threadIdx.x; d < a.dim; d += kThreads) {
    float s = 0.0f;
    for (uint32_t i = b; i < e; ++i) s += a.rows[static_cast<uint64_t>(a.order[i]) * a.dim + d];
    a.sums[static_cast<uint64_t>(l) * a.dim + d] = s;
  }
}
